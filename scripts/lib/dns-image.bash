# The cluster DNS image's name, shared by scripts/images/build (which makes it) and
# scripts/lib/dns.bash (whose Deployment runs it): tagged with the keelson-dns binary's hash, so
# every node of one release computes the same name and a new binary rolls the pods.
dns_image_tag() { sha256sum "$1" | cut -c1-12; }
dns_image() { echo "${KEELSON_REGISTRY:-127.0.0.1:5000}/keelson/dns:$(dns_image_tag "$1")"; }
