"""CI runners (issue #15 item 6): the GitHub Actions composite action (scripts/github-action) and
the GitLab CI snippet (scripts/gitlab-ci/sandboxd.yml) parse, their shell passes `bash -n` (and
shellcheck), the example jobs of sandboxd(1) ("CI runners") use exactly what they define, and the action hands its
inputs to its script through env, never pasted into the shell. setup-sandboxd's refusals are
checked here; its real run, on a fresh Debian machine, is tests/vm/test_package.py."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACTION = os.path.join(REPO, "scripts/github-action/action.yml")
SETUP = os.path.join(REPO, "scripts/github-action/setup-sandboxd")
GITLAB = os.path.join(REPO, "scripts/gitlab-ci/sandboxd.yml")
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def man_yaml_blocks(page="man/sandboxd.1"):
    """The `.Bd -literal` blocks of a man page that are YAML documents (mandoc's `\\e` undone)."""
    text = open(os.path.join(REPO, page)).read()
    blocks = []
    for b in re.findall(r"^\.Bd -literal[^\n]*\n(.*?)^\.Ed$", text, re.M | re.S):
        try:
            blocks.append(yaml.safe_load(b.replace("\\e", "\\").replace("\\&", "")))
        except yaml.YAMLError:
            pass  # a shell or JSON example, not a job
    return blocks


def bash_n(script):
    r = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + script


def test_action_is_a_composite_action_running_its_script():
    a = load(ACTION)
    assert a["name"] and a["description"]
    assert a["runs"]["using"] == "composite"
    assert set(a["inputs"]) == {"deb", "sha256", "rootfs", "image", "apparmor-fallback"}
    assert a["inputs"]["deb"]["required"] is True
    for name, i in a["inputs"].items():
        assert i.get("description"), name
        if not i.get("required"):
            assert "default" in i, name
    steps = a["runs"]["steps"]
    assert len(steps) == 1 and steps[0]["shell"] == "bash"
    run = steps[0]["run"]
    bash_n(run)
    assert run.split()[0] == '"$GITHUB_ACTION_PATH/setup-sandboxd"'
    # No ${{ }} in the shell line (script injection); each input reaches it through env.
    assert "${{" not in run
    for name in a["inputs"]:
        var = [k for k, v in steps[0]["env"].items() if v == "${{ inputs.%s }}" % name]
        assert len(var) == 1 and f'"${var[0]}"' in run, name
    # The output the step sets.
    assert a["outputs"]["version"]["value"] == "${{ steps.%s.outputs.version }}" % steps[0]["id"]
    assert "version=" in open(SETUP).read()


def test_setup_script_passes_bash_n_and_shellcheck():
    bash_n(open(SETUP).read())
    if not shutil.which("shellcheck"):
        (pytest.fail if CI else pytest.skip)("shellcheck is not installed (scripts/install-deps)")
    r = subprocess.run(["shellcheck", "-S", "warning", SETUP], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    # Its options are the action's inputs, one for one.
    opts = set(re.findall(r"^\t(--[a-z0-9-]+)\)", open(SETUP).read(), re.M))
    assert opts == {"--" + i for i in load(ACTION)["inputs"]}


@pytest.mark.parametrize("args,msg", [
    ([], "--deb PATH|URL is required"),
    (["--deb", "/nonexistent.deb"], "--deb /nonexistent.deb: no such file"),
    (["--deb", "http://example.invalid/x.deb"], "only https:// URLs"),
    (["--deb", "x.deb", "--sha256", "abc"], "--sha256 wants 64 hex digits"),
    (["--deb", "x.deb", "--apparmor-fallback", "yes"], "--apparmor-fallback wants none or sysctl"),
    (["--bogus"], "unknown argument `--bogus'"),
])
def test_setup_refuses_bad_input_in_one_line(args, msg, tmp_path):
    r = subprocess.run([SETUP, *args], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr.startswith("setup-sandboxd: ") and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_setup_refuses_a_deb_whose_sha256_differs(tmp_path):
    deb = tmp_path / "sandboxd.deb"
    deb.write_bytes(b"not what was promised")
    r = subprocess.run([SETUP, "--deb", str(deb), "--sha256", "0" * 64], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    if r.stderr.startswith("setup-sandboxd: not root and no sudo"):
        pytest.skip("not root and no sudo")
    assert r.returncode == 1 and "sha256 is " in r.stderr and "not installed" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


def test_gitlab_snippet_parses_and_its_shell_is_valid():
    g = load(GITLAB)
    job = g[".sandboxd"]
    assert set(job["variables"]) == {"SANDBOXD_PACKAGE_URL", "SANDBOXD_PACKAGE_SHA256"}
    lines = job["before_script"]
    assert all(isinstance(ln, str) for ln in lines)
    for ln in lines:
        bash_n(ln)
    bash_n("set -eo pipefail\n" + "\n".join(lines))
    joined = "\n".join(lines)
    for want in ("apt-get install", "sha256sum -c", "sandboxd rootfs fetch", "sandboxd doctor"):
        assert want in joined, want


def test_example_jobs_use_what_the_snippets_define():
    blocks = man_yaml_blocks()
    inputs = load(ACTION)["inputs"]
    gh = [b for b in blocks if isinstance(b, dict) and "jobs" in b]
    assert len(gh) == 1, "one GitHub workflow example in sandboxd(1)"
    steps = [s for job in gh[0]["jobs"].values() for s in job["steps"]]
    uses = [s for s in steps if "scripts/github-action" in s.get("uses", "")]
    assert len(uses) == 1
    with_ = uses[0].get("with", {})
    assert set(with_) <= set(inputs) and "deb" in with_
    runs = "\n".join(s.get("run", "") for s in steps)
    bash_n(runs)
    assert re.search(r"sandboxd exec .*--report report\.json tests/check\.py", runs), runs
    assert any("upload-artifact" in s.get("uses", "") and "report.json" in str(s.get("with", {}).get("path", ""))
               for s in steps), "the report is uploaded"

    gl = [b for b in blocks if isinstance(b, dict) and "include" in b]
    assert len(gl) == 1, "one GitLab example in sandboxd(1)"
    jobs = [v for k, v in gl[0].items() if isinstance(v, dict) and v.get("extends") == ".sandboxd"]
    assert len(jobs) == 1
    job = jobs[0]
    assert set(job.get("variables", {})) <= set(load(GITLAB)[".sandboxd"]["variables"])
    script = "\n".join(job["script"])
    bash_n(script)
    assert re.search(r"sandboxd exec .*--report report\.json tests/check\.py", script), script
    assert "report.json" in job["artifacts"]["paths"] and job["artifacts"]["when"] == "always"
