# Leader election on the whole node: the controller manager, the scheduler and the ingress
# controller (on by default, as upstream) each hold their Lease in kube-system under its
# upstream-style name, renewed by a holder named <hostname>_<uuid>, which `kubectl get lease`
# shows. Sourced by scripts/e2e (k, pass, fail, until_ok).

for lease in kube-controller-manager kube-scheduler keelson-ingress; do
  name="leader_election_${lease//-/_}_holds_its_lease"
  holder=$(k get lease -n kube-system "$lease" -o jsonpath='{.spec.holderIdentity}' 2>&1 || true)
  if [[ "$holder" == *_* ]] && k get lease -n kube-system "$lease" 2>/dev/null | grep -qF "$holder"; then
    pass "$name"
  else
    fail "$name" "holder '$holder'; $(k get lease -n kube-system 2>&1 | head -5)"
  fi
done
