"""The coding-agent cage (`oarbank-agent cage`) against a real git.

Three worktrees of real repositories: a plain clone-like repository (a
.git directory), a linked worktree from `git worktree add` (a .git pointer
file, a git directory and a common directory in the main repository), and a
worktree made with `git init --separate-git-dir` (a pointer file and a git
directory beside the worktree). In each, an agent script run in the cage
tries every write that would make the user's next, unconfined git command
run something it planted: the config (core.fsmonitor, core.hooksPath), a
hook, info/attributes, objects, packed-refs, the index, the pointer file, a
rename of .git, a new .git renamed over it, unlink, umount and a mount over
it, a nested repository with its own fsmonitor and a commit there with
core.hooksPath given by -c. Then the test runs `git status`, `git commit`
and `git log` outside the cage, as the owner, and checks that nothing
planted ran: every planted script would create a marker file in a directory
the cage cannot reach. A control runs the same agent unconfined and shows
that the markers do appear then.

The same agent builds and runs a C test in the worktree (exec_writable,
the default of a writable worktree), reads its state directory, and cannot
open a planted ~/.ssh/id_rsa or another project. Egress: a network
namespace with two servers (198.19.N.0/24), as test_egress.py: the allowed
name is reached through the job's proxy, nothing else is. As root and as
uid 65534 (the tree is then owned by 65534).

Needs root (uid switching, network namespaces); CI runs as root. Jobs run
--unproven: no battery attestation exists in a test.
"""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from testlib import AGENT, FAULTY
UPSTREAM = os.path.join(os.path.dirname(__file__), "egress_upstream.py")

if os.geteuid() != 0:
    pytest.skip("uid switching and network namespaces need root (CI runs as root)", allow_module_level=True)

KINDS = ["dir", "linked", "separate"]
MARKERS = ["fsmonitor-config", "hook-pre-commit", "hook-post-commit", "hooks-path", "attributes-filter",
           "pointer-fsmonitor", "newgit-fsmonitor", "nested-fsmonitor", "nested-hook"]

# The agent: every write it tries is one entry of its JSON answer, "ok" or
# the errno's name; each git command it runs, {"rc": exit code, "stderr"}.
# argv: KIND MARKERS GIT_DIR COMMON_DIR STATE SECRET OTHER
AGENT_SCRIPT = r'''
import ctypes, errno, json, os, shutil, subprocess, sys
kind, markers, git_dir, common, state, secret, other = sys.argv[1:8]
wt = os.getcwd()
out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))

def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)

def script(name):
    """A planted script: run outside the cage, it leaves a marker."""
    path = os.path.join(wt, "evil-" + name + ".sh")
    write(path, "#!/bin/sh\ntouch %s/%s\nexit 1\n" % (markers, name))
    os.chmod(path, 0o755)
    return path

def git(*args, cwd=wt):
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    return {"rc": r.returncode, "stderr": r.stderr}

def libc_call(fn, *args):
    libc = ctypes.CDLL(None, use_errno=True)
    if getattr(libc, fn)(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))

# An evil git directory the agent builds in the worktree (it may: the
# worktree is writable), to point .git at.
subprocess.run(["git", "init", "-q", os.path.join(wt, "evil-src")], check=True, capture_output=True)
evil_git = os.path.join(wt, "evil-src", ".git")
write(os.path.join(evil_git, "config"), "[core]\n\tfsmonitor = %s\n" % script("newgit-fsmonitor"), "a")
write(os.path.join(wt, "evil-pointer"), "[core]\n\tfsmonitor = %s\n" % script("pointer-fsmonitor"))

attempt("config", lambda: write(os.path.join(common, "config"),
                                "[core]\n\tfsmonitor = %s\n" % script("fsmonitor-config"), "a"))
if git_dir != common:
    attempt("worktree_config", lambda: write(os.path.join(git_dir, "config.worktree"),
                                             "[core]\n\tfsmonitor = %s\n" % script("fsmonitor-config")))
def hook(name):
    path = os.path.join(common, "hooks", name)
    shutil.copy(script("hook-" + name), path)
    os.chmod(path, 0o755)
attempt("hook_pre_commit", lambda: hook("pre-commit"))
attempt("hook_post_commit", lambda: hook("post-commit"))
attempt("info_attributes", lambda: write(os.path.join(common, "info", "attributes"), "* filter=evil\n"))
attempt("objects", lambda: write(os.path.join(common, "objects", "planted"), "x"))
attempt("objects_pack", lambda: write(os.path.join(common, "objects", "pack", "planted.pack"), "x"))
attempt("packed_refs", lambda: write(os.path.join(common, "packed-refs"), "0" * 40 + " refs/heads/planted\n"))
attempt("refs", lambda: write(os.path.join(common, "refs", "heads", "planted"), "0" * 40 + "\n"))
attempt("head", lambda: write(os.path.join(git_dir, "HEAD"), "ref: refs/heads/planted\n"))
attempt("index", lambda: write(os.path.join(git_dir, "index"), "x", "a"))
attempt("chmod_config", lambda: os.chmod(os.path.join(common, "config"), 0o777))
attempt("unlink_config", lambda: os.unlink(os.path.join(common, "config")))
if kind != "dir":
    attempt("pointer", lambda: write(os.path.join(wt, ".git"), "gitdir: %s\n" % evil_git))
    attempt("pointer_append", lambda: write(os.path.join(wt, ".git"), "\n", "a"))
moves = not os.environ.get("AGENT_NO_MOVES")  # the control leaves .git in place
if moves:
    attempt("rename_git", lambda: os.rename(os.path.join(wt, ".git"), os.path.join(wt, ".git-moved")))
    if kind == "dir":
        attempt("new_git_over", lambda: os.rename(evil_git, os.path.join(wt, ".git")))
        attempt("rmdir_git", lambda: os.rmdir(os.path.join(wt, ".git")))
    else:
        write(os.path.join(wt, "new-pointer"), "gitdir: %s\n" % evil_git)
        attempt("new_git_over", lambda: os.rename(os.path.join(wt, "new-pointer"), os.path.join(wt, ".git")))
        attempt("unlink_git", lambda: os.unlink(os.path.join(wt, ".git")))
    attempt("exchange_git", lambda: libc_call("renameat2", -100, os.path.join(wt, "evil-src").encode(), -100,
                                              os.path.join(wt, ".git").encode(), 2))
    attempt("umount_git", lambda: libc_call("umount2", os.path.join(wt, ".git").encode(), 2))
    attempt("mount_over_git", lambda: libc_call("mount", b"none", os.path.join(wt, ".git").encode(), b"tmpfs", 0, None))
    attempt("bind_over_git", lambda: libc_call("mount", evil_git.encode(), os.path.join(wt, ".git").encode(), None,
                                               4096, None))
out["git_config_fsmonitor"] = git("config", "core.fsmonitor", script("fsmonitor-config"))
out["git_config_hookspath"] = git("config", "core.hooksPath", os.path.join(wt, "evil-hooks"))
# A nested repository of the agent's own: its config and hooks are its own
# to write, and a commit there with core.hooksPath given by -c runs inside
# the cage, where no marker can be made.
nested = os.path.join(wt, "nested")
subprocess.run(["git", "init", "-q", nested], check=True, capture_output=True)
write(os.path.join(nested, ".git", "config"), "[core]\n\tfsmonitor = %s\n" % script("nested-fsmonitor"), "a")
os.makedirs(os.path.join(wt, "evil-hooks"), exist_ok=True)
shutil.copy(script("nested-hook"), os.path.join(wt, "evil-hooks", "pre-commit"))
out["nested_commit"] = git("-c", "user.name=a", "-c", "user.email=a@b", "-c",
                           "core.hooksPath=" + os.path.join(wt, "evil-hooks"), "commit", "-q", "--allow-empty",
                           "-m", "n", cwd=nested)
out["outer_commit"] = git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "c")
out["git_log_in_cage"] = subprocess.run(["git", "log", "--format=%s"], capture_output=True, text=True).stdout.split()
# The work an agent is there for: edit a tracked file, build and run a test.
write(os.path.join(wt, "tracked.txt"), "edited by the agent\n", "a")
write(os.path.join(wt, "t.c"), '#include <stdio.h>\nint main(void){puts("c-test-ok");return 0;}\n')
r = subprocess.run(["cc", "-o", "t", "t.c"], capture_output=True, text=True)
out["cc"] = r.returncode
out["c_test"] = subprocess.run(["./t"], capture_output=True, text=True).stdout.strip() if r.returncode == 0 else r.stderr
with open(os.path.join(state, "agent.json")) as f:
    out["state"] = json.load(f)
attempt("state_write", lambda: write(os.path.join(state, "session.log"), "written\n"))
for name, path in (("ssh_key", secret), ("other_project", other)):
    attempt(name, lambda: open(path).read())
out["home"] = os.environ.get("HOME")
out["tmpdir"] = os.environ.get("TMPDIR")
out["env"] = sorted(os.environ)
out["passed"] = os.environ.get("PASSED")
print(json.dumps(out))
'''

# What the cage must answer for each attempt, and why that errno.
REFUSED_WRITES = {
    # The history is a read-only bind inside the worktree and lies on the
    # cage's read-only mounts outside it: the VFS answers EROFS for the
    # mount before Landlock (EACCES) is asked.
    **dict.fromkeys(["config", "worktree_config", "hook_pre_commit", "hook_post_commit", "info_attributes", "objects",
                     "objects_pack", "packed_refs", "refs", "head", "index", "chmod_config", "unlink_config",
                     "pointer", "pointer_append"], "EROFS"),
    # .git is a mount point (the carve-out's bind onto itself): the VFS
    # refuses to rename, replace, exchange or remove a mount point.
    **dict.fromkeys(["rename_git", "new_git_over", "rmdir_git", "unlink_git", "exchange_git"], "EBUSY"),
    # seccomp answers EPERM for mount and umount2 (and the job holds no
    # capability either).
    **dict.fromkeys(["umount_git", "mount_over_git", "bind_over_git"], "EPERM"),
}
# Those the agent does not try for a kind: config.worktree only where the
# git directory is not the common one (a linked worktree), the pointer file
# only where .git is one, rmdir only where it is a directory.
NOT_TRIED = {"dir": {"worktree_config", "pointer", "pointer_append", "unlink_git"}, "linked": {"rmdir_git"},
             "separate": {"worktree_config", "rmdir_git"}}


def as_user(uid, cmd):
    return cmd if uid == 0 else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]


class Tree:
    """A temporary tree owned by `uid`: repositories, state, secrets."""

    def __init__(self, uid):
        self.uid = uid
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="ocage-"))
        os.chmod(self.root, 0o755)
        self.markers = self.root / "markers"
        self.home = self.root / "home"
        for d in (self.markers, self.home / ".ssh", self.root / "repos", self.root / "state", self.root / "other",
                  self.root / "tools"):
            d.mkdir(parents=True, exist_ok=True)
        os.chmod(self.markers, 0o777)
        (self.home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n[user]\n\tname = Owner\n\temail = o@example.org\n")
        (self.home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nplanted\n")
        os.chmod(self.home / ".ssh" / "id_rsa", 0o600)
        (self.root / "other" / "secret.txt").write_text("another project's secret\n")
        (self.root / "state" / "agent.json").write_text('{"model": "m", "session": 7}\n')
        (self.root / "tools" / "agent.py").write_text(AGENT_SCRIPT)
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(self.root)], check=True)
        os.chown(self.root / "tools", 0, 0)
        os.chown(self.root / "tools" / "agent.py", 0, 0)
        self.repos = {}
        main = self.root / "repos" / "main"
        self.git("init", "-q", "-b", "main", str(main))
        (main / "tracked.txt").write_text("one\n")
        self.git("add", "tracked.txt", cwd=main)
        self.git("commit", "-q", "-m", "first", cwd=main)
        (main / "tracked.txt").write_text("two\n")
        self.git("commit", "-q", "-am", "second", cwd=main)
        self.repos["dir"] = (main, main / ".git", main / ".git")
        linked = self.root / "repos" / "linked"
        self.git("worktree", "add", "-q", "-b", "feature", str(linked), cwd=main)
        self.repos["linked"] = (linked, main / ".git" / "worktrees" / "linked", main / ".git")
        sep, sep_git = self.root / "repos" / "sep", self.root / "repos" / "sep.git"
        self.git("init", "-q", "-b", "main", f"--separate-git-dir={sep_git}", str(sep))
        (sep / "tracked.txt").write_text("one\n")
        self.git("add", "tracked.txt", cwd=sep)
        self.git("commit", "-q", "-m", "first", cwd=sep)
        self.repos["separate"] = (sep, sep_git, sep_git)
        # What the test wrote itself belongs to the owner as well (tools stay root's).
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(self.root / "repos")], check=True)

    def env(self):
        return {"PATH": "/usr/bin:/bin", "HOME": str(self.home), "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"}

    def git(self, *args, cwd=None, check=True):
        r = subprocess.run(as_user(self.uid, ["git", *args]), cwd=cwd, env=self.env(), capture_output=True, text=True,
                           timeout=60)
        if check:
            assert r.returncode == 0, f"git {args}: {r.stderr}"
        return r

    def cage(self, *args, cwd=None, env=None, timeout=120, agent=AGENT):
        return subprocess.run(as_user(self.uid, [agent, "cage", "--unproven", *args]), cwd=cwd,
                              env=env if env is not None else {"PATH": "/usr/bin:/bin"}, capture_output=True,
                              text=True, timeout=timeout)

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(params=[0, 65534], ids=["root", "nobody"])
def tree(request):
    t = Tree(request.param)
    yield t
    t.cleanup()


def agent_argv(t, kind):
    wt, git_dir, common = t.repos[kind]
    return ["/usr/bin/python3", str(t.root / "tools" / "agent.py"), kind, str(t.markers), str(git_dir), str(common),
            str(t.root / "state"), str(t.home / ".ssh" / "id_rsa"), str(t.root / "other" / "secret.txt")]


def snapshot(git_dir, common):
    """Every file of the history, with its bytes."""
    out = {}
    for top in {git_dir, common}:
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = pathlib.Path(dirpath) / f
                out[str(p)] = p.read_bytes()
    return out


def user_git_round(t, wt):
    """What the user does afterwards, outside the cage, hooks enabled."""
    for args in (["status"], ["add", "tracked.txt"], ["commit", "-q", "-m", "after the agent"], ["log", "--oneline"]):
        r = t.git(*args, cwd=wt, check=False)
        assert r.returncode == 0, f"git {args}: {r.stdout}{r.stderr}"
    return t.git("log", "--format=%s", cwd=wt).stdout.split("\n")


@pytest.mark.parametrize("kind", KINDS)
def test_the_agent_cannot_plant_anything_the_users_git_runs(tree, kind):
    t = tree
    wt, git_dir, common = t.repos[kind]
    before = snapshot(git_dir, common)
    pointer_before = (wt / ".git").read_bytes() if kind != "dir" else None
    # git leaves a --separate-git-dir repository no back-pointer to its
    # worktree: the caller names its git directory.
    git_dir_args = ["--git-dir", str(git_dir)] if kind == "separate" else []
    r = t.cage("--worktree", str(wt), "--writable", *git_dir_args, "--state", str(t.root / "state"), "--scratch",
               str(t.root / "scratch"), "--read", str(t.root / "tools"), "--env", "PASSED=yes", "--json", "--",
               *agent_argv(t, kind), env={"PATH": "/usr/bin:/bin", "SECRET_TOKEN": "caller-only"})
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["fault"] == "none" and result["exit_code"] == 0, result
    # The history as the cage placed it: carved out inside the worktree, granted read-only outside it.
    assert result["cage"]["read_only"] == [str(wt / ".git")], result["cage"]
    history = [] if kind == "dir" else list(dict.fromkeys([str(git_dir), str(common)]))
    assert [p for p in result["cage"]["read"] if p in (str(git_dir), str(common))] == history, result["cage"]
    assert result["cage"]["exec_writable"] is True and result["cage"]["net"] == "none"
    out = json.loads(result["stdout"].strip().splitlines()[-1])
    assert {n for n in REFUSED_WRITES if n not in out} == NOT_TRIED[kind], out
    assert {n: out[n] for n in REFUSED_WRITES if n in out} == {
        n: e for n, e in REFUSED_WRITES.items() if n not in NOT_TRIED[kind]}, out
    # git in the cage: `git config` cannot take the config's lock (255), a
    # commit cannot create the index's lock (128), both for the read-only
    # mount. (git names a .git directory's config by its relative path.)
    config = ".git/config" if kind == "dir" else f"{common}/config"
    for name in ("git_config_fsmonitor", "git_config_hookspath"):
        assert out[name] == {"rc": 255, "stderr": f"error: could not lock config file {config}: "
                                                  "Read-only file system\n"}, (name, out)
    assert out["outer_commit"] == {"rc": 128, "stderr": f"fatal: Unable to create '{git_dir}/index.lock': "
                                                        "Read-only file system\n"}, out
    # The nested repository's planted fsmonitor and pre-commit hook run in
    # the cage, cannot reach the markers, and the hook's `exit 1` stops the
    # commit there.
    assert out["nested_commit"]["rc"] == 1, out
    for m in ("nested-fsmonitor", "nested-hook"):
        assert f"touch: cannot touch '{t.markers}/{m}': Read-only file system\n" in out["nested_commit"]["stderr"], out
    assert out["git_log_in_cage"][:1] == [t.git("log", "-1", "--format=%s", cwd=wt).stdout.strip()], out
    # What the agent is there for works.
    assert out["cc"] == 0 and out["c_test"] == "c-test-ok", out
    assert out["state"] == {"model": "m", "session": 7} and out["state_write"] == "ok", out
    assert out["ssh_key"] == "EACCES" and out["other_project"] == "EACCES", out
    assert out["home"] == out["tmpdir"] == str(t.root / "scratch"), out
    assert out["passed"] == "yes" and "SECRET_TOKEN" not in out["env"], out
    # Nothing of the history changed, and the user's git runs nothing planted.
    assert snapshot(git_dir, common) == before
    if pointer_before is not None:
        assert (wt / ".git").read_bytes() == pointer_before
    assert (wt / ".git").is_dir() == (kind == "dir") and not (wt / ".git-moved").exists()
    log = user_git_round(t, wt)
    assert log[0] == "after the agent", log
    assert sorted(os.listdir(t.markers)) == [], "a planted script ran outside the cage"
    # The nested repository is the agent's; the user's git never entered it.
    assert (wt / "nested" / ".git").is_dir()


@pytest.mark.parametrize("kind,planted", [("dir", {"fsmonitor-config"}),
                                          ("separate", {"fsmonitor-config"})])
def test_control_unconfined_the_same_agent_plants_what_the_users_git_runs(kind, planted):
    """Positive control for the markers: the same script outside the cage
    (leaving .git where it is), then the user's git: the planted fsmonitor
    runs, and with a pointer file the user's git follows it into the agent's
    git directory."""
    t = Tree(0)
    try:
        wt = t.repos[kind][0]
        r = subprocess.run(agent_argv(t, kind), cwd=wt, capture_output=True, text=True, timeout=120,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(t.root / "scratch-control"), "AGENT_NO_MOVES": "1"})
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["config"] == "ok" and out["hook_pre_commit"] == "ok", out
        for m in os.listdir(t.markers):  # the agent's own commit in its nested repository
            os.unlink(t.markers / m)
        if kind == "separate":
            assert (wt / ".git").read_text().startswith(f"gitdir: {wt}/evil-src/.git")
        for args in (["status"], ["commit", "-q", "--allow-empty", "-m", "x"]):
            t.git(*args, cwd=wt, check=False)
        assert planted <= set(os.listdir(t.markers)), os.listdir(t.markers)
    finally:
        t.cleanup()


def test_a_carve_out_inside_a_state_directory_and_read_only_paths(tree):
    """--read-only PATH keeps a part of a writable directory read-only, deep
    inside it: its ancestors cannot be renamed to carry it away."""
    t = tree
    wt = t.repos["dir"][0]
    deep = wt / "docs" / "spec"
    subprocess.run(as_user(t.uid, ["mkdir", "-p", str(deep)]), check=True)
    subprocess.run(as_user(t.uid, ["sh", "-c", f"echo v1 > {deep}/api.md"]), check=True)
    script = (f"cd {wt}; echo v2 > docs/spec/api.md; echo w=$?; mv docs docs2; echo mv=$?; mv docs/spec docs/x; "
              f"echo mvspec=$?; mkdir -p new/spec; mv -T new docs; echo over=$?; echo ok > docs/other.md; echo other=$?")
    r = t.cage("--worktree", str(wt), "--writable", "--read-only", str(deep), "--", "/bin/sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert "w=0" not in r.stdout and "mv=1" in r.stdout and "mvspec=1" in r.stdout and "over=1" in r.stdout, r.stdout
    assert "other=0" in r.stdout, r.stdout  # the rest of docs/ stays writable
    assert (deep / "api.md").read_text() == "v1\n" and (wt / "docs" / "other.md").exists()
    assert not (wt / "docs2").exists()


def test_refused_below_the_abi_floor_or_without_landlock_and_nothing_runs(tree):
    t = tree
    wt = t.repos["dir"][0]
    marker = t.markers / "ran"
    base = ["--worktree", str(wt), "--writable"]
    r = t.cage("--landlock-abi-max", "5", "--abi-floor", "6", *base, "--", "/bin/sh", "-c", f"touch {wt}/ran")
    assert r.returncode == 70, r.stderr
    assert r.stderr.count("\n") == 1 and "abi_floor" in r.stderr and "below the floor 6" in r.stderr, r.stderr
    r = t.cage("--landlock-abi-max", "0", *base, "--", "/bin/sh", "-c", f"touch {wt}/ran")
    assert r.returncode == 70 and r.stderr.count("\n") == 1, r.stderr
    assert not (wt / "ran").exists() and not marker.exists()
    # Positive control: at the floor it runs.
    r = t.cage("--landlock-abi-max", "6", "--abi-floor", "6", *base, "--", "/bin/sh", "-c", f"touch {wt}/ran")
    assert r.returncode == 0, r.stderr
    assert (wt / "ran").exists()


def test_exec_writable_follows_the_worktree_and_the_option(tree):
    t = tree
    wt = t.repos["dir"][0]
    build = f"cd {wt} && printf '#!/bin/sh\\necho built-ran\\n' > b.sh && chmod +x b.sh && ./b.sh"
    assert "built-ran" in t.cage("--worktree", str(wt), "--writable", "--", "/bin/sh", "-c", build).stdout
    r = t.cage("--worktree", str(wt), "--writable", "--no-exec-writable", "--", "/bin/sh", "-c", build)
    assert r.returncode == 126 and "built-ran" not in r.stdout, r.stdout + r.stderr
    # A read-only worktree: the scratch is writable and not executable by default.
    scratch = t.root / "scratch"
    prog = f"cd {scratch} && printf '#!/bin/sh\\necho built-ran\\n' > b.sh && chmod +x b.sh && ./b.sh"
    r = t.cage("--worktree", str(wt), "--scratch", str(scratch), "--", "/bin/sh", "-c", prog)
    assert r.returncode == 126, r.stdout + r.stderr
    r = t.cage("--worktree", str(wt), "--scratch", str(scratch), "--exec-writable", "--", "/bin/sh", "-c", prog)
    assert r.returncode == 0 and "built-ran" in r.stdout, r.stdout + r.stderr
    # A read-only worktree is a read grant on the cage's read-only mounts:
    # the VFS refuses the create for the mount (EROFS) before Landlock would
    # (EACCES, "Permission denied"), and dash exits 2 for a failed redirect.
    r = t.cage("--worktree", str(wt), "--", "/bin/sh", "-c", f"echo x > {wt}/f")
    assert r.returncode == 2 and r.stderr == f"/bin/sh: 1: cannot create {wt}/f: Read-only file system\n", r.stderr
    assert not (wt / "f").exists()


def test_without_allow_there_is_no_network(tree):
    t = tree
    probe = ("import socket\nfor a in (('127.0.0.1', 3128), ('198.19.1.1', 443)):\n"
             "    try:\n        s = socket.socket(); s.settimeout(2); s.connect(a); print('connected')\n"
             "    except OSError as e:\n        print(type(e).__name__)\n")
    r = t.cage("--worktree", str(t.repos["dir"][0]), "--", "/usr/bin/python3", "-c", probe)
    assert r.returncode == 0, r.stderr
    assert "connected" not in r.stdout and len(r.stdout.split()) == 2, r.stdout


@pytest.mark.parametrize("args,code,message", [
    (["--worktree", "/nonexistent-ocage"], 64, "usage: --worktree: no such file or directory: /nonexistent-ocage"),
    (["--writable"], 64, "usage: --writable: needs --worktree DIR"),
    (["--allow", "10.0.0.1"], 64, "usage: --allow[0]: IP addresses are not allowed"),
    (["--allow", "localhost"], 64, "usage: --allow[0]: localhost"),
    (["--env", "1BAD=x"], 64, "usage: --env: expected NAME or NAME=VALUE"),
    (["--env", "OCAGE_UNSET_VARIABLE"], 64, "usage: --env OCAGE_UNSET_VARIABLE: not set"),
    (["--abi-floor", "0"], 64, "usage: "),
    (["--timeout", "nan"], 64, "usage: "),
    (["--state", "/nonexistent-ocage"], 64, "usage: --state[0]: no such file or directory"),
    (["--read-only", "/usr"], 64, "usage: --read-only[0]: /usr lies inside no writable grant"),
])
def test_bad_input_is_one_line_and_a_documented_code(args, code, message):
    r = subprocess.run([AGENT, "cage", "--unproven", *args, "--", "/bin/true"], capture_output=True, text=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == code, r.stderr
    assert r.stderr.startswith(message) and r.stderr.count("\n") == 1, r.stderr


def test_a_planted_dot_git_symlink_is_refused_with_70(tree):
    t = tree
    wt = t.root / "repos" / "planted"
    subprocess.run(as_user(t.uid, ["mkdir", str(wt)]), check=True)
    subprocess.run(as_user(t.uid, ["ln", "-s", str(t.repos["dir"][1]), str(wt / ".git")]), check=True)
    r = t.cage("--worktree", str(wt), "--writable", "--", "/bin/sh", "-c", f"touch {wt}/ran")
    assert r.returncode == 70, r.stderr
    assert r.stderr.startswith("sandbox: refused: worktree .git: ") and "symbolic link" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and not (wt / "ran").exists()


def test_the_scratch_is_created_and_help_names_the_exec_default(tree):
    t = tree
    scratch = t.root / "new" / "scratch"
    subprocess.run(as_user(t.uid, ["mkdir", str(t.root / "new")]), check=True)
    r = t.cage("--scratch", str(scratch), "--", "/bin/sh", "-c", "echo $HOME $TMPDIR; touch $HOME/f")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(scratch)] * 2 and (scratch / "f").exists()
    assert oct(scratch.stat().st_mode & 0o777) == "0o700" and scratch.stat().st_uid == t.uid
    h = subprocess.run([AGENT, "cage", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "default: on with --writable, off otherwise" in h


# ---- Egress: the allowed host through the job's proxy, nothing else ----

NET = 60 + os.getpid() % 150
SUBNET = f"198.19.{NET}"
ALLOWED, UNLISTED = f"{SUBNET}.2", f"{SUBNET}.3"
NS = f"ocg-{os.getpid()}"
VETH_HOST, VETH_NS = f"ocgh{os.getpid() % 100000}", f"ocgn{os.getpid() % 100000}"


def sh(*args, check=True):
    return subprocess.run(args, capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture(scope="module")
def net_world():
    work = pathlib.Path(tempfile.mkdtemp(prefix="ocage-net-"))
    os.chmod(work, 0o755)
    sh("ip", "netns", "add", NS)
    proc = None
    try:
        sh("ip", "link", "add", VETH_HOST, "type", "veth", "peer", "name", VETH_NS)
        sh("ip", "link", "set", VETH_NS, "netns", NS)
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", VETH_HOST)
        sh("ip", "link", "set", VETH_HOST, "up")
        for a in (ALLOWED, UNLISTED):
            sh("ip", "netns", "exec", NS, "ip", "addr", "add", f"{a}/24", "dev", VETH_NS)
        sh("ip", "netns", "exec", NS, "ip", "link", "set", VETH_NS, "up")
        log = work / "upstream.log"
        log.touch()
        os.chmod(log, 0o644)
        proc = subprocess.Popen(["ip", "netns", "exec", NS, "python3", UPSTREAM, str(log), f"{ALLOWED}|443|banner",
                                 f"{UNLISTED}|443|banner"], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline(), "upstream servers did not start"
        resolver = work / "resolver.txt"
        resolver.write_text(f"allowed.test {ALLOWED}\nunlisted.test {UNLISTED}\n")
        os.chmod(resolver, 0o644)
        yield {"log": log, "resolver": resolver}
    finally:
        if proc:
            proc.kill()
            proc.wait()
        sh("ip", "link", "del", VETH_HOST, check=False)
        sh("ip", "netns", "del", NS, check=False)
        shutil.rmtree(work, ignore_errors=True)


CLIENT = r'''
import json, os, socket, sys
proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
out = {}
def via_proxy(target):
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    data = b""
    while b"\n" not in data.split(b"\r\n\r\n", 1)[-1] and len(data) < 4096:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").split("\r\n")[0] + " | " + data.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip()
out["allowed"] = via_proxy("allowed.test:443")
out["unlisted"] = via_proxy("unlisted.test:443")
def direct(addr):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((addr, 443))
        return "connected"
    except OSError as e:
        return type(e).__name__
out["direct"] = direct(sys.argv[1])
print(json.dumps(out))
'''


def landlock_abi():
    r = subprocess.run([AGENT, "sandbox-report"], capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)["landlock"]["abi"]


def accepts(log, address):
    return [json.loads(l) for l in log.read_text().splitlines()
            if json.loads(l)["event"] == "accept" and json.loads(l)["local"] == address]


def test_an_allowed_host_is_reached_through_the_proxy_and_nothing_else(tree, net_world):
    if landlock_abi() < 4:
        pytest.skip("Landlock ABI < 4: egress-allowlist is refused here (exit 70)")
    t = tree
    before_allowed = len(accepts(net_world["log"], f"{ALLOWED}:443"))
    before_unlisted = len(accepts(net_world["log"], f"{UNLISTED}:443"))
    r = t.cage("--worktree", str(t.repos["dir"][0]), "--allow", "allowed.test", "--egress-test-public-range",
               f"{SUBNET}.0/24", "--egress-test-resolver", str(net_world["resolver"]), "--",
               "/usr/bin/python3", "-c", CLIENT, ALLOWED, agent=FAULTY)  # a resolver file: the test-only build's
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["allowed"] == f"HTTP/1.1 200 Connection established | BANNER {ALLOWED}:443", out
    assert out["unlisted"].startswith("HTTP/1.1 403"), out
    assert out["direct"] in ("PermissionError", "OSError", "ConnectionRefusedError"), out
    time.sleep(0.2)
    assert len(accepts(net_world["log"], f"{ALLOWED}:443")) == before_allowed + 1
    assert len(accepts(net_world["log"], f"{UNLISTED}:443")) == before_unlisted


def test_the_timeout_kills_the_job(tree):
    t = tree
    start = time.monotonic()
    r = t.cage("--worktree", str(t.repos["dir"][0]), "--timeout", "1", "--json", "--", "/bin/sleep", "30")
    assert r.returncode == 137, r.stderr
    assert json.loads(r.stdout)["fault"] == "timeout"
    assert time.monotonic() - start < 15


def test_the_gate_refuses_a_launcher_whose_carve_out_is_not_read_only(tree):
    """The test-only oarbank-agent-faulty leaves the carve-out binds out: the
    supervisor reads the launcher's mountinfo at the gate and refuses it
    before anything runs (70). The same binary without the fault runs."""
    t = tree
    wt = t.repos["dir"][0]
    script = f"echo planted >> {wt}/.git/config"
    env = {"PATH": "/usr/bin:/bin", "OARBANK_FAULT_SKIP_STEP": "read-only-carve-outs"}
    r = subprocess.run(as_user(t.uid, [FAULTY, "cage", "--unproven", "--worktree", str(wt), "--writable", "--", "/bin/sh",
                                       "-c", script]), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 70, r.stdout + r.stderr
    assert f"the read-only carve-out {wt}/.git is not mounted read-only" in r.stderr, r.stderr
    assert "planted" not in (wt / ".git" / "config").read_text()
    env.pop("OARBANK_FAULT_SKIP_STEP")
    r = subprocess.run(as_user(t.uid, [FAULTY, "cage", "--unproven", "--worktree", str(wt), "--writable", "--",
                                       "/bin/true"]), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_read_and_read_file_grant_exactly_what_they_name(tree):
    t = tree
    other = t.root / "other"
    (other / "shared.txt").write_text("shared\n")
    os.chown(other / "shared.txt", t.uid, t.uid)
    script = (f"cat {other}/shared.txt; cat {other}/secret.txt 2>/dev/null || echo secret-refused; "
              f"echo x > {other}/shared.txt 2>/dev/null || echo write-refused; cat {t.home}/.ssh/id_rsa 2>/dev/null "
              f"|| echo key-refused")
    r = t.cage("--read-file", str(other / "shared.txt"), "--", "/bin/sh", "-c", script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["shared", "secret-refused", "write-refused", "key-refused"], r.stdout
    r = t.cage("--read", str(other), "--", "/bin/sh", "-c", f"cat {other}/secret.txt")
    assert r.returncode == 0 and r.stdout == "another project's secret\n", r.stdout + r.stderr
