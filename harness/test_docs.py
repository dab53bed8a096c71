"""The manual pages cannot go stale silently: each renders without a groff
warning, every subcommand and option the binaries' --help lists is in
oarbank-agent(1) or oarbank-conform(1), and every field the policy and
manifest parsers accept is in oarbank-policy(5) or oarbank-manifest(5)."""
import os
import re
import subprocess

import pytest

from testlib import AGENT, BUILD, CONFORM, ROOT
PAGES = ["oarbank-agent.1", "oarbank-conform.1", "oarbank-policy.5", "oarbank-manifest.5"]


def source(page):
    with open(os.path.join(ROOT, "man", page + ".scd")) as f:
        return f.read()


def help_text(binary, *args):
    r = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def subcommands(text):
    """The names CLI11 lists under "Subcommands:"."""
    names, inside = [], False
    for line in text.splitlines():
        if re.match(r"^subcommands:", line, re.I):
            inside = True
        elif inside and re.match(r"^  \S", line):
            names.append(line.split()[0])
        elif inside and line.strip() == "":
            inside = False
    return names


def options(text):
    return sorted(set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text)))


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_warnings(page):
    path = os.path.join(BUILD, "man", page)
    assert os.path.exists(path), f"{path} not built: scripts/setup.sh installs scdoc, then ninja -C build man"
    r = subprocess.run(["man", "--warnings", "-l", path], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat"))
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    assert len(r.stdout) > 1000


def test_every_agent_subcommand_and_option_is_documented():
    page = source("oarbank-agent.1")
    top = help_text(AGENT)
    subs = subcommands(top)
    assert {"sandbox-exec", "sandbox-report", "run", "egress-proxy", "broker", "manifest-check", "approve",
            "manifest-policy"} <= set(subs), top
    missing = [f"{o} (top level)" for o in options(top) if o not in page]
    for sub in subs:
        assert f"*{sub}*" in page, f"subcommand {sub} is not in oarbank-agent(1)"
        missing += [f"{sub} {o}" for o in options(help_text(AGENT, sub)) if o not in page]
    assert not missing, "not in man/oarbank-agent.1.scd: " + ", ".join(missing)


def test_every_conform_option_is_documented():
    page = source("oarbank-conform.1")
    top = help_text(CONFORM)
    assert subcommands(top) == ["module", "mutants"], top
    missing = [o for o in options(top) if o not in page]
    for sub in ("module", "mutants"):
        missing += [f"{sub} {o}" for o in options(help_text(CONFORM, sub)) if o not in page]
        assert f"*{sub}*" in page
    assert not missing, "not in man/oarbank-conform.1.scd: " + ", ".join(missing)


def parser_keys(path):
    """Every key list a CheckKeys call of `path` accepts, as (prefix, key)."""
    with open(os.path.join(ROOT, path)) as f:
        text = f.read()
    keys = []
    for prefix, names in re.findall(r'CheckKeys\(\s*[^,]+,\s*([^,]+?),\s*\{([^}]*)\}', text):
        keys += [(prefix.strip(), k) for k in re.findall(r'"([^"]+)"', names)]
    assert len(keys) > 10, path
    return keys


def test_every_policy_field_is_documented():
    page = source("oarbank-policy.5")
    missing = []
    for prefix, key in parser_keys("sandbox/policy/policy.cc"):
        # Top-level fields have their own entry; nested ones are named in it.
        top = prefix == '""'
        if (f"*{key}*" not in page) if top else (f"*{key}*" not in page and f'"{key}"' not in page):
            missing.append(key if top else f"{prefix}: {key}")
    assert not missing, "not in man/oarbank-policy.5.scd: " + ", ".join(missing)


def test_every_manifest_key_is_documented():
    page = source("oarbank-manifest.5")
    missing = [f"{prefix}: {key}" for prefix, key in parser_keys("sandbox/manifest/manifest.cc")
               if f"*{key}*" not in page and f"[{key}]" not in page and f" {key}," not in page
               and f" {key} " not in page]
    assert not missing, "not in man/oarbank-manifest.5.scd: " + ", ".join(missing)


def test_exit_codes_and_environment_are_documented():
    page = source("oarbank-agent.1")
    for code in ("*64*", "*70*", "*71*", "*77*"):
        assert code in page
    for name in ("OARBANK_BATTERY_ATTESTATION", "OARBANK_APPROVALS", "OARBANK_TOOL_REGISTRY"):
        assert name in page
    for path in ("battery-attestation.json", "approvals.json", "tools.toml"):
        assert path in page


def test_no_test_only_option_in_any_help():
    """The test-only build's options (a resolver file for the egress proxy)
    are refused by the production agent and listed in none of its help; the
    public test range, limited to 198.18.0.0/15, is a documented option."""
    texts = {"oarbank-agent": help_text(AGENT), "oarbank-conform": help_text(CONFORM),
             "oarbank-conform module": help_text(CONFORM, "module")}
    for sub in subcommands(texts["oarbank-agent"]):
        texts[f"oarbank-agent {sub}"] = help_text(AGENT, sub)
    for name, text in texts.items():
        assert "TEST ONLY" not in text, name
        assert "test-resolver" not in text, name
