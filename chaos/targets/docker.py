"""Target ``docker``: nodes as containers on a private network, through the docker SDK, from a normal image or the host's own userland."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import psutil
from pydantic import Field, model_validator

from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, HarnessError
from chaos.runtime.launch import PACKAGE_ROOT, Rendezvous, workload_argv, workload_cwd, workload_env
from chaos.runtime.network import node_address, pick_subnet, run_names, used_networks
from chaos.targets.base import Node, Target, TargetConfig
from chaos.targets.netns import nnodes_arg, require_root, surviving_exit_code
from chaos.runtime.hostimage import ensure_host_image, host_binds
from chaos.runtime.undo import Command

HOST_IMAGE = "host"
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")


class DockerConfig(TargetConfig):
    nodes: int = Field(default=2, ge=2, le=32)
    """Nodes (containers), one torchrun agent each."""
    min_nodes: int | None = Field(default=None, ge=1)
    """Elastic: torchrun --nnodes MIN:MAX with MIN=min_nodes, MAX=nodes."""
    image: str = HOST_IMAGE
    """'host': a tiny image of this host's userland (/usr, /etc and the Python install bind-mounted read-only, no registry needed); or the name of an image that has Python and torch (e.g. built from ci/Dockerfile.node)."""
    python: str | None = None
    """Python inside the container; default this harness's interpreter for 'host', python3 for other images."""
    rdzv_port: int = Field(default=29400, ge=1024, le=65535)
    """c10d rendezvous port on node 0's container."""
    last_call_timeout_s: int = Field(default=2, ge=1, le=600)
    """Elastic: how long a re-rendezvous waits for more nodes once min_nodes are there."""
    keep_alive_interval_s: int = Field(default=1, ge=1, le=60)
    """Rendezvous heartbeat period; a node missing 3 heartbeats is dropped from the next round."""
    shm_size: str = "256m"
    """/dev/shm per container (docker's default 64m is tight for torch)."""

    @model_validator(mode="after")
    def _min_not_above_max(self) -> "DockerConfig":
        if self.min_nodes is not None and self.min_nodes > self.nodes:
            raise ValueError(f"min_nodes ({self.min_nodes}) must not exceed nodes ({self.nodes})")
        return self


class ContainerNode(Node):
    """A node whose agent is a container's main process; its exit code comes from docker once that process is gone."""

    def __init__(self, *args: Any, client: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client = client
        self._code: int | None = None

    def poll(self) -> int | None:
        if self._code is not None:
            return self._code
        pid = self.info.get("pid")
        if pid and psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            return None  # cheap: no API call while the agent's host pid lives
        state = self.client.api.inspect_container(self.info["container"])["State"]
        if state.get("Running"):
            return None
        self._code = int(state.get("ExitCode", 1))
        return self._code


class Docker(Target, kind="docker"):
    """N nodes as containers on a private docker network (docker SDK), one torchrun agent each (needs dockerd)."""

    Config = DockerConfig

    def __init__(self, config: DockerConfig) -> None:
        super().__init__(config)
        self.client: Any = None

    @property
    def node_count(self) -> int:
        return self.config.nodes

    def _client(self) -> Any:
        if self.client is None:
            try:
                import docker
            except ImportError:
                raise CapabilityError("the docker target needs the docker SDK: pip install docker") from None
            try:
                self.client = docker.from_env(timeout=30)
                self.client.ping()
            except docker.errors.DockerException as exc:
                raise CapabilityError(f"the docker target needs a running docker daemon ({exc}); start it with "
                                      f"'dockerd > /tmp/dockerd.log 2>&1 &' or ci/install-node-tools.sh "
                                      f"(apt-get install -y docker.io first)") from None
        return self.client

    def check(self, run: RunContext) -> None:
        super().check(run)
        require_root("docker target")  # network faults enter the containers' namespaces with nsenter
        self._client()

    # ------------------------------------------------------------------ image

    def image(self, run: RunContext) -> str:
        """The node image: an existing one by name, or the host-userland image (built once, then reused)."""
        client = self._client()
        if self.config.image != HOST_IMAGE:
            import docker

            try:
                client.images.get(self.config.image)
            except docker.errors.ImageNotFound:
                raise CapabilityError(f"image '{self.config.image}' not found; build it (docker build -f "
                                      f"ci/Dockerfile.node -t {self.config.image} .) or use image: host") from None
            return self.config.image
        ref, new = ensure_host_image(client)
        if new:
            run.log("docker_image", image=ref, built_from="host userland (bind mounts)")
        return ref

    # ------------------------------------------------------------------ network and nodes

    def _subnet(self, run: RunContext) -> Any:
        if run.subnet is None:
            used = run.shell.run(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
            used += run.shell.run(["ip", "-4", "-o", "addr", "show"], check=False).stdout
            for net in self._client().networks.list():
                for pool in (net.attrs.get("IPAM") or {}).get("Config") or []:
                    used += " " + pool.get("Subnet", "")
            run.subnet = pick_subnet(run_names(run).rid, used_networks(used))
        return run.subnet

    def plan(self, run: RunContext) -> list[str]:
        n = run_names(run)
        return [f"docker network create --internal --subnet <private /24> {n.docker_network}",
                *[f"docker run -d --name {n.container(k)} --network {n.docker_network} <image> torchrun ... "
                  f"(node {k})" for k in range(self.config.nodes)]]

    def prepare(self, run: RunContext) -> None:
        import docker

        client = self._client()
        n = run_names(run)
        subnet = self._subnet(run)
        self.image_ref = self.image(run)
        run.ledger.push("target", Command(["docker", "network", "rm", n.docker_network],
                                          only_if=["docker", "network", "inspect", n.docker_network]))
        pool = docker.types.IPAMPool(subnet=str(subnet), gateway=str(subnet.network_address + 1))
        # internal: no route out of the network, so the run's traffic stays between its containers.
        client.networks.create(n.docker_network, driver="bridge", internal=True,
                               ipam=docker.types.IPAMConfig(pool_configs=[pool]), labels={"chaos.run": n.rid})
        self.nodes = [ContainerNode(name=f"node{k}", rank=k, address=node_address(subnet, k), client=client,
                                    info={"container": n.container(k), "ifname": "eth0"})
                      for k in range(self.config.nodes)]
        run.log("nodes", target="docker", subnet=str(subnet), image=self.image_ref,
                nodes=[{"name": x.name, "address": x.address, **x.info} for x in self.nodes])

    def rendezvous(self, run: RunContext, node: Node) -> Rendezvous:
        c = self.config
        return Rendezvous(
            standalone=False, host=self.nodes[0].address or "", port=c.rdzv_port,
            nnodes=nnodes_arg(c.nodes, c.min_nodes), node_rank=node.rank, run_id=f"chaos-{run_names(run).rid}",
            local_addr=node.address,
            rdzv_conf={"is_host": "true" if node.rank == 0 else "false",
                       "last_call_timeout": str(c.last_call_timeout_s),
                       "keep_alive_interval": str(c.keep_alive_interval_s)})

    def _binds(self, run: RunContext) -> dict[str, dict[str, str]]:
        binds = host_binds() if self.config.image == HOST_IMAGE else {}
        binds[str(PACKAGE_ROOT)] = {"bind": str(PACKAGE_ROOT), "mode": "ro"}
        script = run.experiment.resolve_script()
        if script is not None and not script.is_relative_to(PACKAGE_ROOT):
            binds[str(script.parent)] = {"bind": str(script.parent), "mode": "ro"}
        for rw in (run.run_dir.resolve(), run.ckpt_dir.resolve()):
            binds[str(rw)] = {"bind": str(rw), "mode": "rw"}
        return binds

    def _env(self, run: RunContext, node: Node) -> dict[str, str]:
        full = workload_env(run, node.name)
        env = {k: v for k, v in full.items()
               if k in _ENV_KEEP or k.startswith(("CHAOS_", "PYTHON")) or k in run.experiment.workload.env}
        env["GLOO_SOCKET_IFNAME"] = "eth0"
        # Absolute: the container's working directory is not the harness's, relative paths would miss the binds.
        env.update(CHAOS_RUN_DIR=str(run.run_dir.resolve()), CHAOS_EVENTS_DIR=str(run.events_dir.resolve()),
                   CHAOS_CKPT_DIR=str(run.ckpt_dir.resolve()))
        return env

    def launch(self, run: RunContext) -> list[Node]:
        client = self._client()
        n = run_names(run)
        python = self.config.python or (sys.executable if self.config.image == HOST_IMAGE else "python3")
        log = run.run_dir.resolve() / "output.log"
        for node in self.nodes:
            argv = workload_argv(run, self.rendezvous(run, node), python=python)
            cname = node.info["container"]
            # Removal registered before creation; "target/procs" so stopping the run removes it too.
            run.ledger.push("target/procs", Command(["docker", "rm", "-f", cname],
                                                    only_if=["docker", "inspect", "--type", "container", cname]))
            host_config = client.api.create_host_config(
                binds=self._binds(run), tmpfs={"/tmp": ""}, shm_size=self.config.shm_size,
                network_mode=n.docker_network, init=False)
            net = client.api.create_networking_config(
                {n.docker_network: client.api.create_endpoint_config(ipv4_address=node.address)})
            created = client.api.create_container(
                self.image_ref, command=["/bin/sh", "-c", f"exec {shlex.join(argv)} >> {shlex.quote(str(log))} 2>&1"],
                name=cname, hostname=node.name, environment=self._env(run, node),
                working_dir=workload_cwd(run) or str(run.run_dir.resolve()),  # workload.cwd is under the bound run dir
                host_config=host_config, networking_config=net, labels={"chaos.run": n.rid})
            client.api.start(created["Id"])
            pid = int(client.api.inspect_container(created["Id"])["State"]["Pid"])
            if pid <= 0:
                raise HarnessError(f"container {cname} did not start; see {log} and 'docker logs {cname}'")
            node.info.update(pid=pid, net_exec=["nsenter", "-t", str(pid), "-n"])
            run.tree.add_root(node.name, pid)
            run.log("node_launch", node=node.name, pid=pid, address=node.address, container=cname)
        return self.nodes

    def exit_code(self) -> int | None:
        return surviving_exit_code(self.nodes)
