"""Checks deploy/kubernetes/graphrun.yaml without a Kubernetes cluster.

Parses every document (PyYAML, Debian's python3-yaml), then for each role:
the StatefulSet's serviceName is a headless Service selecting exactly its
pods, the Service port, the container port and GRAPHRUN_PORT agree, and
NUM_PS / NUM_WORKERS match the replica counts. Runs the entry point of the
ConfigMap for every pod (HOSTNAME = ROLE-ORDINAL, PRINT_TF_CONFIG=1) and
checks the TF_CONFIG it derives: the same cluster for every pod, each pod
at its own Service DNS name, its own type and index. Finally makes the
certificates with `graphrun tls init` for those DNS names and checks that
every file the entry point names exists in what it made.
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml

ROOT = os.environ.get("TEST_SRCDIR", "") + "/graphrun" if os.environ.get("TEST_SRCDIR") else "."
MANIFEST = os.path.join(ROOT, "deploy/kubernetes/graphrun.yaml")
GRAPHRUN = os.path.join(ROOT, "tools/graphrun")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def main():
    with open(MANIFEST) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    kinds = {}
    for d in docs:
        kinds.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    check(set(kinds) == {"ConfigMap", "Service", "StatefulSet"}, f"kinds: {sorted(kinds)}")
    sets = kinds["StatefulSet"]
    services = kinds["Service"]
    replicas = {s["spec"]["template"]["metadata"]["labels"]["role"]: s["spec"]["replicas"]
                for s in sets.values()}
    check(set(replicas) == {"ps", "worker"}, f"roles: {sorted(replicas)}")
    script = kinds["ConfigMap"]["graphrun-entrypoint"]["data"]["entrypoint.sh"]

    configs = {}
    for name, s in sets.items():
        spec = s["spec"]
        labels = spec["template"]["metadata"]["labels"]
        role = labels["role"]
        check(name == f"graphrun-{role}", f"{name}: named after its role {role}")
        check(spec["selector"]["matchLabels"] == labels, f"{name}: selector matches its pods")
        svc = services.get(spec["serviceName"])
        check(svc is not None, f"{name}: serviceName {spec['serviceName']} is a Service")
        if svc is None:
            continue
        check(svc["spec"].get("clusterIP") == "None", f"{spec['serviceName']}: headless")
        check(svc["spec"]["selector"] == labels, f"{spec['serviceName']}: selects {name}'s pods")
        (container,) = spec["template"]["spec"]["containers"]
        env = env_of(container)
        port = int(env["GRAPHRUN_PORT"])
        check(env["GRAPHRUN_ROLE"] == role, f"{name}: GRAPHRUN_ROLE is {role}")
        check([p["containerPort"] for p in container["ports"]] == [port],
              f"{name}: containerPort is GRAPHRUN_PORT {port}")
        check([p["port"] for p in svc["spec"]["ports"]] == [port],
              f"{spec['serviceName']}: port is {port}")
        check(int(env["NUM_PS"]) == replicas["ps"], f"{name}: NUM_PS = ps replicas")
        check(int(env["NUM_WORKERS"]) == replicas["worker"], f"{name}: NUM_WORKERS = workers")
        volumes = {v["name"]: v for v in spec["template"]["spec"]["volumes"]}
        for m in container["volumeMounts"]:
            check(m["name"] in volumes, f"{name}: volume {m['name']} is defined")
        check(volumes["tls"]["secret"]["secretName"] == "graphrun-tls", f"{name}: TLS Secret")
        check(volumes["token"]["secret"]["secretName"] == "graphrun-token", f"{name}: token Secret")
        check(volumes["entrypoint"]["configMap"]["name"] == "graphrun-entrypoint",
              f"{name}: entry point ConfigMap")
        for i in range(spec["replicas"]):
            pod_env = dict(os.environ, HOSTNAME=f"{name}-{i}", PRINT_TF_CONFIG="1",
                           **{k: v for k, v in env.items()})
            out = subprocess.run(["/bin/sh", "-c", script, "entrypoint.sh"], env=pod_env,
                                 capture_output=True, text=True, check=True).stdout
            cfg = json.loads(out)
            configs[(role, i)] = cfg
            check(cfg["task"] == {"type": role, "index": i}, f"{name}-{i}: task {cfg['task']}")
            own = f"{name}-{i}.{spec['serviceName']}:{port}"
            check(cfg["cluster"][role][i] == own, f"{name}-{i}: listed as {own}")

    clusters = {json.dumps(c["cluster"], sort_keys=True) for c in configs.values()}
    check(len(clusters) == 1, f"every pod derives the same cluster: {clusters}")
    cluster = next(iter(configs.values()))["cluster"]
    check({j: len(a) for j, a in cluster.items()} == replicas, f"cluster sizes {cluster}")

    # The certificates the header tells to make, for the pods' DNS names.
    hosts = [a.rsplit(":", 1)[0] for addrs in cluster.values() for a in addrs]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([GRAPHRUN, "tls", "init", d + "/certs", "--hosts=" + ",".join(hosts)],
                       check=True, capture_output=True)
        for h in hosts:
            for ext in ("crt", "key"):
                check(os.path.exists(f"{d}/certs/{h}.{ext}"), f"certificate file {h}.{ext}")
        check("--hosts=" + ",".join(sorted(hosts)) in open(MANIFEST).read().replace(" ", ""),
              "the header's tls init names every pod")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print(f"ok: {len(docs)} documents, {len(configs)} pods, cluster {json.dumps(cluster)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
