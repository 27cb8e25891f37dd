"""kmock's Kubernetes emulator (PyPI kmock) on ADDRESS:PORT, plain HTTP, for the node components'
tests against an API server Keelson did not write (testing/src/kmock.rs).

Usage: emulator.py ADDRESS PORT RESOURCE...   (RESOURCE as kmock names it: "v1/services",
"discovery.k8s.io/v1/endpointslices"; each namespaced unless it is in CLUSTER_SCOPED)

The emulator is kmock's own, untouched: objects stored as posted, patches merged as plain JSON,
lists with resourceVersion "...", watches that replay every object and then stream changes,
with no resourceVersion on objects, no bookmarks, no selectors, no protobuf and no Tables.
Declaring the resources is what makes an empty list answer 200 rather than 404.
Prints "listening on URL" once it accepts connections; stops on SIGTERM.
"""

import asyncio
import signal
import sys

import kmock

CLUSTER_SCOPED = {"nodes", "namespaces", "clusterroles", "clusterrolebindings"}


async def main(address: str, port: int, resources: list[str]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator, host=address, port=port) as server:
        for name in resources:
            plural = name.rsplit("/", 1)[-1]
            emulator.resources[name] = kmock.ResourceInfo(
                namespaced=plural not in CLUSTER_SCOPED,
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
            )
        print(f"listening on {server.url}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:]))
