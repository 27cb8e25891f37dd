# Clients Keelson did not write, installed for the interop tests (apiserver/tests/interop_*.rs).
"$(dirname "${BASH_SOURCE[0]}")/../interop/python" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/../interop/js" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/../interop/ruby" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/../interop/kubectl" >/dev/null
"$(dirname "${BASH_SOURCE[0]}")/../interop/kmock" >/dev/null
