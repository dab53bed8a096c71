"""What one job leaves for the next: the same command twice, the second run
judged.

A job's writable grants, and everything below them, are written by an
adversary, for every later decision. Run 1 plants what a later run would
follow (a link in place of a nested grant, a `.git` pointer or a
`commondir` naming the caller's ~/.ssh or /); run 2, the same command, must
be refused with one line naming what was planted, and the host side checks
that the caller's home, its ~/.ssh and another project were neither read
into the job's output nor written. Each plant is first shown to have landed
(run 1 could write it), so the refusal is the cage's, not a failed plant.

Through `cage` and `run`, as root and as uid 65534, with openat2 and with
openat2 forced to ENOSYS (the test-only launcher's hook), so the O_NOFOLLOW
walk that stands in for it on old kernels is exercised end to end. The
layouts git itself writes (a linked worktree, a submodule, a
--separate-git-dir repository named with --git-dir) keep working.

Needs root (uid switching); CI runs as root. Jobs run --unproven: no battery
attestation exists in a test.
"""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from testlib import AGENT, FAULTY, NOBODY

KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\ncross-run\n"
BASHRC = "# the caller's\n"

if os.geteuid() != 0:
    pytest.skip("uid switching needs root (CI runs as root)", allow_module_level=True)


class World:
    """A caller's home (with ~/.ssh/id_rsa and ~/.bashrc), another project,
    and a place for worktrees and state, all owned by `uid`."""

    def __init__(self, uid, walk):
        self.uid, self.walk = uid, walk
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="ocross-"))
        os.chmod(self.root, 0o755)
        self.home = self.root / "home"
        (self.home / ".ssh").mkdir(parents=True)
        (self.home / ".ssh" / "id_rsa").write_text(KEY)
        (self.home / ".bashrc").write_text(BASHRC)
        (self.root / "other").mkdir()
        (self.root / "other" / "secret.txt").write_text("another project's secret\n")
        (self.root / "work").mkdir()
        subprocess.run(["chown", "-R", f"{uid}:{uid}", str(self.root)], check=True)
        os.chmod(self.home, 0o700)

    def as_user(self, cmd):
        return cmd if self.uid == 0 else ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups",
                                          *cmd]

    def agent(self, *args, timeout=120):
        env = {"PATH": "/usr/bin:/bin", "HOME": str(self.home), "GIT_CONFIG_NOSYSTEM": "1"}
        binary = AGENT
        if self.walk == "no-openat2":
            binary = FAULTY
            env["OARBANK_FAULT_SKIP_STEP"] = "openat2"
        return subprocess.run(self.as_user([binary, *args]), env=env, capture_output=True, text=True,
                              timeout=timeout)

    def cage(self, *args):
        return self.agent("cage", "--unproven", *args)

    def mkdir(self, *paths):
        for p in paths:
            subprocess.run(self.as_user(["mkdir", "-p", str(p)]), check=True)

    def git(self, *args, cwd):
        r = subprocess.run(self.as_user(["git", "-c", "user.name=o", "-c", "user.email=o@example.org",
                                         "-c", "protocol.file.allow=always", *args]), cwd=cwd, capture_output=True,
                           text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "HOME": str(self.home),
                                                       "GIT_CONFIG_NOSYSTEM": "1"})
        assert r.returncode == 0, f"git {args}: {r.stderr}"
        return r.stdout

    def assert_untouched(self, result):
        """Nothing of the home or the other project reached the job's output
        or changed."""
        for secret in ("cross-run", "another project's secret"):
            assert secret not in result.stdout + result.stderr, result
        assert (self.home / ".ssh" / "id_rsa").read_text() == KEY
        assert (self.home / ".bashrc").read_text() == BASHRC
        assert sorted(os.listdir(self.home)) == [".bashrc", ".ssh"]
        assert sorted(os.listdir(self.home / ".ssh")) == ["id_rsa"]
        assert (self.root / "other" / "secret.txt").read_text() == "another project's secret\n"

    def cleanup(self):
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(params=[(0, "openat2"), (0, "no-openat2"), (NOBODY, "openat2"), (NOBODY, "no-openat2")],
                ids=["root", "root-no-openat2", "nobody", "nobody-no-openat2"])
def w(request):
    world = World(*request.param)
    yield world
    world.cleanup()


STEAL = "cat {home}/.ssh/id_rsa; cat {root}/other/secret.txt; echo planted >> {home}/.bashrc"


def one_line(r, code, prefix):
    assert r.returncode == code, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(prefix), r.stderr
    assert r.stdout == ""


def test_a_nested_grant_replaced_by_a_link_is_refused_on_the_next_run(w):
    """An agent CLI keeps its worktrees in its state directory: run 1 moves
    them away and leaves state/worktrees/t42 as a link to the home."""
    state = w.root / "state"
    wt = state / "worktrees" / "t42"
    w.mkdir(wt)
    args = ["--state", str(state), "--worktree", str(wt), "--writable", "--"]
    r = w.cage(*args, "/bin/sh", "-c",
               f"cd / && mv {state}/worktrees {state}/wt-old && mkdir {state}/worktrees && ln -s {w.home} {wt}")
    assert r.returncode == 0, r.stderr
    assert os.readlink(wt) == str(w.home)  # run 1 planted it
    r = w.cage(*args, "/bin/sh", "-c", STEAL.format(home=w.home, root=w.root))
    one_line(r, 64, f"usage: --worktree: {wt} is a symbolic link (to {w.home}), refused: ")
    w.assert_untouched(r)
    # A parent of the grant replaced the same way: state/worktrees itself a link.
    os.unlink(wt)
    os.rmdir(state / "worktrees")
    os.rename(state / "wt-old", state / "moved")
    os.symlink(w.home, state / "worktrees")
    r = w.cage("--state", str(state), "--worktree", str(state / "worktrees" / ".ssh"), "--", "/bin/cat", "id_rsa")
    one_line(r, 64, f"usage: --worktree: {state}/worktrees is a symbolic link (to {w.home}), refused: ")
    w.assert_untouched(r)


def test_a_state_directory_swapped_during_a_run_without_it_is_refused(w):
    """The documented verification run has no --state: its job may replace
    WT/.agent, which the next agent session names as its state."""
    wt = w.root / "work"
    w.mkdir(wt / ".agent")
    r = w.cage("--worktree", str(wt), "--writable", "--", "/bin/sh", "-c",
               f"rm -rf {wt}/.agent && ln -s {w.home} {wt}/.agent")
    assert r.returncode == 0 and os.readlink(wt / ".agent") == str(w.home), r.stderr
    r = w.cage("--worktree", str(wt), "--writable", "--state", str(wt / ".agent"), "--", "/bin/sh", "-c",
               STEAL.format(home=w.home, root=w.root))
    one_line(r, 64, f"usage: --state[0]: {wt}/.agent is a symbolic link (to {w.home}), refused: ")
    w.assert_untouched(r)


def test_a_scratch_swapped_for_a_link_is_refused_and_nothing_is_created_there(w):
    wt, other = w.root / "work", w.root / "scratch-1"
    r = w.cage("--worktree", str(wt), "--writable", "--scratch", str(other), "--", "/bin/ln", "-s", str(w.home),
               str(wt / ".home"))
    assert r.returncode == 0 and os.readlink(wt / ".home") == str(w.home), r.stderr
    for scratch in (wt / ".home", wt / ".home" / "new" / "deeper"):
        r = w.cage("--worktree", str(wt), "--writable", "--scratch", str(scratch), "--", "/bin/sh", "-c",
                   STEAL.format(home=w.home, root=w.root))
        one_line(r, 64, f"usage: --scratch: {wt}/.home is a symbolic link (to {w.home}), refused: ")
        w.assert_untouched(r)  # "new" was not made in the home


def plant_pointer(w, wt, text):
    r = w.cage("--worktree", str(wt), "--writable", "--", "/bin/sh", "-c", text)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("plant,why", [
    ("printf 'gitdir: {home}/.ssh\\n' > .git", "which is not a git directory that lists this worktree"),
    ("printf 'gitdir: /\\n' > .git", "which is not a git directory that lists this worktree"),
    ("mkdir -p .git/objects .git/refs && echo 'ref: refs/heads/m' > .git/HEAD && echo {home}/.ssh > .git/commondir",
     "a .git directory with a commondir"),
    # A git directory of the job's own that names the worktree back, whose
    # commondir names the home: the home does not hold it under worktrees/.
    ("mkdir -p fake/objects fake/refs && echo 'ref: refs/heads/m' > fake/HEAD && echo {home}/.ssh > fake/commondir"
     " && echo $PWD/.git > fake/gitdir && printf 'gitdir: fake\\n' > .git", "which does not hold"),
])
def test_a_planted_git_pointer_is_refused_on_the_next_run(w, plant, why):
    wt = w.root / "work"
    plant_pointer(w, wt, f"cd {wt} && " + plant.format(home=w.home))
    assert (wt / ".git").exists()  # run 1 planted it
    r = w.cage("--worktree", str(wt), "--writable", "--", "/bin/sh", "-c", STEAL.format(home=w.home, root=w.root))
    one_line(r, 70, "sandbox: refused: worktree .git: ")
    assert why in r.stderr, r.stderr
    w.assert_untouched(r)


def test_a_pointer_to_the_enclosing_checkouts_history_is_refused(w):
    """A worktree that is a subdirectory of a checkout: run 1 points .git at
    the checkout's own history, which does not list this directory."""
    repo = w.root / "work" / "project"
    w.mkdir(repo / "sub")
    w.git("init", "-q", "-b", "main", str(repo), cwd=w.root)
    w.git("commit", "-q", "--allow-empty", "-m", "first", cwd=repo)
    r = w.cage("--worktree", str(repo / "sub"), "--writable", "--json", "--", "/bin/true")
    assert json.loads(r.stdout)["cage"]["history"] == {
        "kind": "inside-checkout", "checkout": str(repo),
        "note": f"{repo}/sub is a subdirectory of the checkout at {repo}, whose history is not in the cage: there is "
                "no history to protect, a repository the job creates there is its own, and git must run on it only "
                "inside the cage (docs/coding-agent.md)"}, r.stdout
    plant_pointer(w, repo / "sub", f"printf 'gitdir: {repo}/.git\\n' > {repo}/sub/.git")
    r = w.cage("--worktree", str(repo / "sub"), "--writable", "--", "/bin/sh", "-c",
               f"git -C {repo}/sub log; " + STEAL.format(home=w.home, root=w.root))
    one_line(r, 70, f"sandbox: refused: worktree .git: {repo}/sub/.git: points to {repo}/.git, which is not a git "
                    "directory that lists this worktree")
    w.assert_untouched(r)


def test_the_history_kind_is_said(w):
    plain = w.root / "work"
    r = w.cage("--worktree", str(plain), "--json", "--", "/bin/true")
    assert json.loads(r.stdout)["cage"]["history"]["kind"] == "none", r.stdout
    w.git("init", "-q", str(plain), cwd=w.root)
    r = w.cage("--worktree", str(plain), "--json", "--", "/bin/true")
    assert json.loads(r.stdout)["cage"]["history"] == {"kind": "repository"}, r.stdout


def test_the_layouts_git_writes_keep_working(w):
    """A linked worktree and a submodule prove themselves; a
    --separate-git-dir repository, which git leaves no back-pointer for, runs
    with --git-dir and is refused without it."""
    main = w.root / "work" / "main"
    w.git("init", "-q", "-b", "main", str(main), cwd=w.root)
    w.git("commit", "-q", "--allow-empty", "-m", "first", cwd=main)
    w.git("worktree", "add", "-q", "-b", "feature", str(w.root / "work" / "linked"), cwd=main)
    w.git("submodule", "add", "-q", str(main), "sm", cwd=main)
    w.git("commit", "-q", "-m", "with sm", cwd=main)
    sep, sep_git = w.root / "work" / "sep", w.root / "work" / "sep.git"
    w.git("init", "-q", "-b", "main", f"--separate-git-dir={sep_git}", str(sep), cwd=w.root)
    w.git("commit", "-q", "--allow-empty", "-m", "separate", cwd=sep)
    for wt, extra, subject in ((w.root / "work" / "linked", [], "first"), (main / "sm", [], "first"),
                               (sep, ["--git-dir", str(sep_git)], "separate")):
        r = w.cage("--worktree", str(wt), "--writable", *extra, "--", "/usr/bin/git", "log", "-1", "--format=%s")
        assert r.returncode == 0 and r.stdout == subject + "\n", (wt, r.stdout, r.stderr)
    r = w.cage("--worktree", str(sep), "--writable", "--", "/usr/bin/git", "log")
    one_line(r, 70, f"sandbox: refused: worktree .git: {sep}/.git: points to {sep_git}, which is not a git directory "
                    "that lists this worktree (pass --git-dir if it is)")


def write_policy(w, path, **fields):
    doc = {"contract": 1, "role": "runner", "bundle": "/usr", "net": {"mode": "none"}, **fields}
    path.write_text(json.dumps(doc))
    os.chmod(path, 0o644)
    return str(path)


@pytest.mark.parametrize("field", ["state[0]", "tmp", "read_only[0]"])
def test_run_a_policy_path_inside_a_writable_grant_replaced_by_a_link_is_refused(w, field):
    """`run` with a policy whose state, tmp or read_only lies inside work.
    Inside a job that has them they are mount points it cannot move; run 1
    is a job with work alone (another step of the same pipeline), which
    replaces the directory with a link to the home; run 2 is refused naming it."""
    work = w.root / "work"
    inner = {"state[0]": work / "state", "tmp": work / "tmp", "read_only[0]": work / "docs"}[field]
    w.mkdir(work / "state", work / "tmp", work / "docs")
    first = write_policy(w, w.root / "first.json", work=str(work))
    second = write_policy(w, w.root / "second.json", work=str(work), tmp=str(work / "tmp"),
                          state=[str(work / "state")], read_only=[str(work / "docs")])
    r = w.agent("run", "--unproven", second, "--", "/bin/mv", str(inner), f"{inner}-old")
    assert r.returncode == 1 and "Device or resource busy" in r.stderr, r.stdout + r.stderr  # a mount point there
    r = w.agent("run", "--unproven", first, "--", "/bin/sh", "-c", f"cd / && mv {inner} {inner}-old && "
                                                                   f"ln -s {w.home} {inner}")
    assert r.returncode == 0 and os.readlink(inner) == str(w.home), r.stdout + r.stderr
    r = w.agent("run", "--unproven", second, "--", "/bin/sh", "-c", STEAL.format(home=w.home, root=w.root))
    one_line(r, 64, f"policy: {field}: {inner} is a symbolic link (to {w.home}), refused: ")
    w.assert_untouched(r)
