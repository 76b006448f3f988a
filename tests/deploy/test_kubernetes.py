"""scripts/deploy/kubernetes: every manifest is valid against the Kubernetes API schemas
(tests/deploy/validate-k8s.mjs: kubernetes-models' JSON Schemas, then its types through tsc for
fields the API does not have), the validator refuses a broken manifest, and the pod has the
settings nested sandboxes need. About 2 s (node, tsc); npm ci on the first run."""
import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KDIR = os.path.join(REPO, "scripts", "deploy", "kubernetes")
MANIFESTS = sorted(glob.glob(os.path.join(KDIR, "*.yaml")))


@pytest.fixture(scope="module")
def validator():
    if not os.path.isdir(os.path.join(HERE, "node_modules", "kubernetes-models")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True)

    def run(*files):
        return subprocess.run(["node", os.path.join(HERE, "validate-k8s.mjs"), *files],
                              capture_output=True, text=True, timeout=120)
    return run


def test_manifests_are_valid(validator):
    kinds = {yaml.safe_load(open(f))["kind"] for f in MANIFESTS}
    assert kinds == {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"}
    r = validator(*MANIFESTS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"{len(MANIFESTS)} passed, 0 failed"


def mutate(tmp_path, edit):
    doc = yaml.safe_load(open(os.path.join(KDIR, "deployment.yaml")))
    edit(doc)
    path = tmp_path / "deployment.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def container(doc):
    return doc["spec"]["template"]["spec"]["containers"][0]


BROKEN = {
    # A misspelt field: the JSON Schemas allow it, the types do not.
    "unknown field": (lambda d: container(d)["securityContext"].update(readOnlyRootFilesytem=True),
                      "readOnlyRootFilesytem"),
    "unknown pod field": (lambda d: d["spec"]["template"]["spec"].update(hostUser=False), "hostUser"),
    "bad enum": (lambda d: container(d)["securityContext"].update(procMount="Unmask"), "procMount"),
    "wrong type": (lambda d: d["spec"].update(replicas="three"), "replicas"),
    "missing required": (lambda d: container(d).pop("name"), "name"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_validator_refuses_a_broken_manifest(validator, tmp_path, case):
    edit, field = BROKEN[case]
    r = validator(mutate(tmp_path, edit))
    assert r.returncode == 1, r.stdout
    assert field in r.stdout and r.stdout.strip().splitlines()[-1] == "0 passed, 1 failed", r.stdout


def test_pod_has_what_nested_sandboxes_need():
    doc = yaml.safe_load(open(os.path.join(KDIR, "deployment.yaml")))
    pod = doc["spec"]["template"]["spec"]
    c = container(doc)
    sc = c["securityContext"]
    assert pod["hostUsers"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "Localhost", "localhostProfile": "sandboxd.json"}
    assert sc["procMount"] == "Unmasked" and sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["appArmorProfile"] == {"type": "Localhost", "localhostProfile": "sandboxd-pod"}
    assert "privileged" not in sc
    # The pod runs sandboxd as an ordinary user: its unprivileged floor holds (sandboxd.policy(5)).
    assert pod["securityContext"]["runAsUser"] != 0 and "runAsUser" not in sc
    args = c["args"]
    assert args[:4] == ["mcp", "--http", "0.0.0.0:8080", "--stateless"] and "--token-file" in args
    # The path the server answers without a token (tests/integration/test_mcp_healthz.py).
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert {"name": "http", "containerPort": 8080, "protocol": "TCP"} in c["ports"]
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    token_file = args[args.index("--token-file") + 1]
    # The file itself (subPath): a Secret volume's keys are symlinks, which sandboxd does not follow.
    assert mounts[token_file]["subPath"] and mounts[token_file]["readOnly"] is True
    assert "/tmp" in mounts


def test_pod_apparmor_profile_is_confined():
    """The profile the manifest names is confined (issue 34, item 7): no `unconfined` flag; the
    runtime default's denials, plus what a sandbox is made of."""
    text = open(os.path.join(REPO, "policy", "apparmor.d", "sandboxd-pod")).read()
    rules = [ln.split("#")[0].strip() for ln in text.splitlines() if ln.split("#")[0].strip()]
    assert "profile sandboxd-pod flags=(attach_disconnected,mediate_deleted) {" in rules, rules
    assert not [r for r in rules if "unconfined" in r and not r.startswith("signal (receive) peer=unconfined")]
    for want in ("userns,", "mount,", "umount,", "pivot_root,", "deny @{PROC}/sysrq-trigger rwklx,",
                 "deny @{PROC}/kcore rwklx,", "deny /sys/kernel/security/** rwklx,", "deny /sys/firmware/** rwklx,"):
        assert want in rules, want
    if shutil.which("apparmor_parser"):
        ver = subprocess.run(["apparmor_parser", "--version"], capture_output=True, text=True).stdout
        m = re.search(r"version (\d+)\.", ver)
        if m and int(m.group(1)) < 4:  # Debian 12's 3.0: abi/3.0 and no userns rule (as tests/deb)
            text = text.replace("abi <abi/4.0>,", "abi <abi/3.0>,").replace("  userns,\n", "")
        r = subprocess.run(["apparmor_parser", "-Q", "-K", "/dev/stdin"], input=text, capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr


SDIR = os.path.join(KDIR, "sessions")
SESSION_MANIFESTS = sorted(glob.glob(os.path.join(SDIR, "*.yaml")))


def test_session_manifests_are_valid(validator):
    """sessions/: the StatefulSet, its headless Service, the ring and nginx (6 documents)."""
    r = validator(*SESSION_MANIFESTS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "6 passed, 0 failed", r.stdout


def test_session_pods_are_the_deployments_but_for_the_ring():
    """The StatefulSet's pods are deployment.yaml's, but without --stateless and with the ring; the
    ring, nginx's upstream and the replica names agree server for server."""
    dep = yaml.safe_load(open(os.path.join(KDIR, "deployment.yaml")))
    ss = yaml.safe_load(open(os.path.join(SDIR, "statefulset.yaml")))
    a, b = dep["spec"]["template"]["spec"], ss["spec"]["template"]["spec"]
    ca, cb = a["containers"][0], b["containers"][0]
    assert cb["args"] == [x for x in ca["args"] if x != "--stateless"] + [
        "--ring-file", "/etc/sandboxd/ring/ring", "--ring-name", "$(POD_NAME).sandboxd-sessions:8080"]
    for key in ("securityContext", "resources", "readinessProbe", "livenessProbe", "image", "command"):
        assert ca[key] == cb[key], key
    for key in ("hostUsers", "securityContext", "terminationGracePeriodSeconds"):
        assert a[key] == b[key], key
    ring = yaml.safe_load(open(os.path.join(SDIR, "ring.yaml")))["data"]["ring"].split()
    n = ss["spec"]["replicas"]
    assert ring == [f"sandboxd-sessions-{i}.sandboxd-sessions:8080" for i in range(n)]
    conf = list(yaml.safe_load_all(open(os.path.join(SDIR, "nginx.yaml"))))[0]["data"]["nginx.conf"]
    assert re.findall(r"^\s*server (\S+);", conf, re.M) == ring
    assert "hash $sandboxd_key consistent;" in conf
