"""A job's directory tree that uid 65534 can reach, and a runner policy for
it: the end-to-end tests run the confined side as root and as 65534, and
pytest's own temporary directories are 0700."""
import json
import os
import shutil
import tempfile
from pathlib import Path


def make_tree(prefix, extra_writable=()):
    """bundle (read-only), work, work/tmp, data and `extra_writable` under a
    fresh 0755 directory in /tmp; the writable ones are 0777, since the job
    may be root (no CAP_DAC_OVERRIDE in its namespace) or 65534."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(root, 0o755)
    writable = ("work", "work/tmp", "data", *extra_writable)
    for d in ("bundle", *writable):
        (root / d).mkdir()
    for d in writable:
        os.chmod(root / d, 0o777)
    return root


def remove_tree(root):
    shutil.rmtree(root, ignore_errors=True)


def write_policy(tree, name="policy.json", **fields):
    """A runner policy over `tree`'s directories, with `fields` on top;
    returns its path."""
    policy = {"contract": 1, "role": "runner", "bundle": str(tree / "bundle"), "work": str(tree / "work"),
              "data": str(tree / "data"), "tmp": str(tree / "work/tmp"), **fields}
    path = Path(tree) / name
    path.write_text(json.dumps(policy))
    os.chmod(path, 0o644)
    return str(path)
