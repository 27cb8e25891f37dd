"""The official Python client (PyPI `kubernetes`) against keelson-apiserver, doing what its
users do: create, get, list with a label selector and pages, watch and resume from a
resourceVersion, the four patch types, delete with each propagation policy (the controller
manager's garbage collector running), and leader election on a Lease. Run by
apiserver/tests/interop_python.rs with KUBECONFIG set; prints "ok: ..." per check and fails
with an AssertionError naming what differed."""

import os
import threading
import time

from kubernetes import client, config, watch
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

NS = "interop-py"


def ok(what):
    print(f"ok: {what}", flush=True)


def eventually(what, check, timeout=30):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        last = check()
        if last is True:
            return
        time.sleep(0.2)
    raise AssertionError(f"{what}: still {last!r} after {timeout}s")


def config_map(name, labels=None, data=None, owner=None):
    meta = client.V1ObjectMeta(name=name, labels=labels)
    if owner is not None:
        meta.owner_references = [
            client.V1OwnerReference(api_version="v1", kind="ConfigMap", name=owner.metadata.name, uid=owner.metadata.uid)
        ]
    return client.V1ConfigMap(metadata=meta, data=data or {"k": name})


def crud_and_lists(core):
    for i in range(5):
        core.create_namespaced_config_map(NS, config_map(f"cm-{i}", {"tier": "a" if i < 3 else "b"}))
    got = core.read_namespaced_config_map("cm-1", NS)
    assert got.data == {"k": "cm-1"} and got.metadata.labels == {"tier": "a"}, got
    ok("create and get")
    selected = core.list_namespaced_config_map(NS, label_selector="tier=a")
    assert sorted(c.metadata.name for c in selected.items) == ["cm-0", "cm-1", "cm-2"], selected
    ok("list with a label selector")
    first = core.list_namespaced_config_map(NS, label_selector="tier", limit=2)
    assert len(first.items) == 2 and first.metadata._continue, first.metadata
    rest = core.list_namespaced_config_map(NS, label_selector="tier", limit=2, _continue=first.metadata._continue)
    last = core.list_namespaced_config_map(NS, label_selector="tier", limit=2, _continue=rest.metadata._continue)
    names = [c.metadata.name for page in (first, rest, last) for c in page.items]
    assert sorted(names) == [f"cm-{i}" for i in range(5)] and not last.metadata._continue, names
    ok("list in pages of 2 with continue tokens")


def watches(core):
    rv = core.list_namespaced_config_map(NS).metadata.resource_version
    seen = []
    w = watch.Watch()
    done = threading.Event()

    def follow():
        for ev in w.stream(core.list_namespaced_config_map, NS, resource_version=rv, timeout_seconds=20):
            seen.append((ev["type"], ev["object"].metadata.name, ev["object"].metadata.resource_version))
            if ev["object"].metadata.name == "watched":
                w.stop()
        done.set()

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    core.create_namespaced_config_map(NS, config_map("watched"))
    assert done.wait(20), f"no ADDED event for watched: {seen}"
    assert seen[-1][:2] == ("ADDED", "watched"), seen
    ok("watch from a list's resourceVersion sees ADDED")
    # Resume from the last event's resourceVersion: the change after it, and nothing before.
    resume_rv = seen[-1][2]
    core.patch_namespaced_config_map("watched", NS, {"data": {"k": "changed"}})
    resumed = []
    w2 = watch.Watch()
    for ev in w2.stream(core.list_namespaced_config_map, NS, resource_version=resume_rv, timeout_seconds=10):
        resumed.append((ev["type"], ev["object"].metadata.name))
        w2.stop()
    assert resumed == [("MODIFIED", "watched")], resumed
    ok("watch resumed from an event's resourceVersion")


def patches(core):
    core.patch_namespaced_config_map("cm-0", NS, {"metadata": {"labels": {"merge": "yes"}}},
                                     _content_type="application/merge-patch+json")
    core.patch_namespaced_config_map("cm-0", NS, {"data": {"strategic": "yes"}},
                                     _content_type="application/strategic-merge-patch+json")
    core.patch_namespaced_config_map("cm-0", NS, [{"op": "add", "path": "/data/json", "value": "yes"}],
                                     _content_type="application/json-patch+json")
    applied = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-0", "namespace": NS},
               "data": {"applied": "yes"}}
    core.patch_namespaced_config_map("cm-0", NS, applied, field_manager="interop-py", force=True,
                                     _content_type="application/apply-patch+yaml")
    got = core.read_namespaced_config_map("cm-0", NS)
    assert got.metadata.labels.get("merge") == "yes", got.metadata.labels
    for key in ("strategic", "json", "applied"):
        assert got.data.get(key) == "yes", got.data
    ok("merge, strategic merge, JSON and apply patches")


def deletes(core):
    def gone(name):
        try:
            core.read_namespaced_config_map(name, NS)
            return False
        except client.ApiException as e:
            return True if e.status == 404 else e.status

    for policy, child_stays in (("Foreground", False), ("Background", False), ("Orphan", True)):
        parent = core.create_namespaced_config_map(NS, config_map(f"parent-{policy.lower()}"))
        child = core.create_namespaced_config_map(NS, config_map(f"child-{policy.lower()}", owner=parent))
        core.delete_namespaced_config_map(parent.metadata.name, NS, propagation_policy=policy)
        eventually(f"{policy}: the parent gone", lambda: gone(parent.metadata.name))
        if child_stays:
            left = core.read_namespaced_config_map(child.metadata.name, NS)
            assert not left.metadata.owner_references, left.metadata
        else:
            eventually(f"{policy}: the dependent gone", lambda: gone(child.metadata.name))
        ok(f"delete with propagationPolicy {policy}")


def leader_election(coordination):
    started = threading.Event()
    lock = LeaseLock("interop-py-leader", NS, "python-candidate")
    cfg = electionconfig.Config(lock, lease_duration=15, renew_deadline=10, retry_period=2,
                                onstarted_leading=started.set, onstopped_leading=lambda: None)
    threading.Thread(target=leaderelection.LeaderElection(cfg).run, daemon=True).start()
    assert started.wait(30), "never leading"
    lease = coordination.read_namespaced_lease("interop-py-leader", NS)
    assert lease.spec.holder_identity == "python-candidate", lease.spec
    ok("leader election on a Lease")


def main():
    config.load_kube_config()
    core = client.CoreV1Api()
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    crud_and_lists(core)
    watches(core)
    patches(core)
    deletes(core)
    leader_election(client.CoordinationV1Api())
    print("all checks passed", flush=True)
    # The elector's thread renews for ever (the client gives it no stop); ending the process
    # here keeps the interpreter's shutdown from tearing its TLS connection down under it.
    os._exit(0)


if __name__ == "__main__":
    main()
