"""The macOS box's newer rules, checked on any machine: Unix sockets with and without the
network, the variables that name a socket, case-folded protection, the allowances real
tools need, the user temp folder asked of the system, and the refusal to nest.

Like test_seatbelt.py these build plans and read them; test_seatbelt_macos.py runs them.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from helpers.seatbelt_profile import (
    ENV,
    Parts,
    Str,
    Sym,
    make_policy,
    make_project,
    parts,
    private,
    read_profile,
    rules,
)

from sandbox.errors import PolicyError, SandboxUnavailable
from sandbox.macos import darwin, seatbelt
from sandbox.policy import Policy, sockets, usertmp
from sandbox.policy.startenv import box_env, host_env

# -- a reader of the network rules: the last rule that matches decides --------------------


def _filter_matches(got: Parts, f: object, kind: str, path: str) -> bool:
    """One filter of a network rule against a Unix socket ``path`` (``kind``: "remote"
    for connect, "local" for bind)."""
    assert isinstance(f, list), f
    if f[0] == Sym("literal"):
        return isinstance(f[1], Str) and f[1].value == path
    if f[0] != Sym(kind) or f[1] != Sym("unix-socket"):
        return False  # an ip filter, or the other end
    if len(f) == 2:
        return True
    sub = f[2]
    assert isinstance(sub, list) and sub[0] == Sym("subpath"), f
    param = sub[1]
    assert isinstance(param, list) and isinstance(param[1], Str), f
    root = got.definitions[param[1].value]
    return path == root or path.startswith(root + "/")


def unix_socket_verdict(got: Parts, operation: str, path: str) -> str:
    """"allow" or "deny" for ``operation`` (network-outbound or network-bind) on a Unix
    socket at ``path``, as Seatbelt decides: the last matching rule wins."""
    kind = "remote" if operation == "network-outbound" else "local"
    verdict = ""
    for form in got.forms:
        assert isinstance(form, list)
        action = form[0]
        if action == Sym("deny") and form[1:] == [Sym("default")]:
            verdict = "deny"
            continue
        ops = [x for x in form[1:] if isinstance(x, Sym)]
        if Sym(operation) not in ops:
            continue
        filters = [f for f in form[1:] if isinstance(f, list)]
        if not filters or any(_filter_matches(got, f, kind, path) for f in filters):
            assert isinstance(action, Sym)
            verdict = action.name
    return verdict


DOCKER = "/private/var/run/docker.sock"
AGENT = "/private/tmp/com.apple.launchd.abc/Listeners"


@pytest.mark.parametrize("network", [True, False])
def test_no_unix_socket_is_reachable_by_default(tmp_path: Path, network: bool) -> None:
    got = parts(seatbelt.plan(make_policy(tmp_path, network=network), ("/bin/true",)))
    for path in (DOCKER, AGENT, str(tmp_path / "home" / ".docker" / "run" / "docker.sock"),
                 private(tmp_path / "proj" / "dev.sock")):
        assert unix_socket_verdict(got, "network-outbound", path) == "deny", path
        assert unix_socket_verdict(got, "network-bind", path) == "deny", path


def test_with_the_network_on_ip_still_goes_out_and_dns_keeps_its_socket(tmp_path: Path) -> None:
    got = parts(seatbelt.plan(make_policy(tmp_path, network=True), ("/bin/true",)))
    assert [Sym("allow"), Sym("network-outbound")] in got.forms
    (deny,) = rules(got.forms, "deny", "network-outbound")
    assert deny == [Sym("deny"), Sym("network-outbound"), [Sym("remote"), Sym("unix-socket")]]
    assert got.forms.index(deny) > got.forms.index([Sym("allow"), Sym("network-outbound")])
    mdns = "/private/var/run/mDNSResponder"
    assert unix_socket_verdict(got, "network-outbound", mdns) == "allow"


def test_without_the_network_dns_has_no_socket_either(tmp_path: Path) -> None:
    got = parts(seatbelt.plan(make_policy(tmp_path), ("/bin/true",)))
    mdns = "/private/var/run/mDNSResponder"
    assert unix_socket_verdict(got, "network-outbound", mdns) == "deny"
    assert "mDNSResponder" not in got.profile


@pytest.mark.parametrize("network", [True, False])
def test_the_boxs_own_sockets_below_its_temp_folder_work(tmp_path: Path, network: bool) -> None:
    policy = make_policy(tmp_path, network=network)
    got = parts(seatbelt.plan(policy, ("/bin/true",)))
    own = private(policy.private_tmp) + "/asyncio-1/s.sock"
    assert got.definitions["BOX_SOCKETS_0"] == private(policy.private_tmp)
    assert unix_socket_verdict(got, "network-bind", own) == "allow"
    assert unix_socket_verdict(got, "network-outbound", own) == "allow"


@pytest.mark.parametrize("network", [True, False])
def test_allowed_sockets_can_be_reached_not_bound(tmp_path: Path, network: bool) -> None:
    colima = tmp_path / "home" / ".colima"
    policy = make_policy(tmp_path, network=network,
                         allow_unix_sockets=["/tmp/agent.sock", "~/.colima"])
    got = parts(seatbelt.plan(policy, ("/bin/true",)))
    assert got.definitions["UNIX_SOCKET_0"] == "/private/tmp/agent.sock"
    assert got.definitions["UNIX_SOCKET_1"] == private(colima)
    for path in ("/private/tmp/agent.sock", private(colima / "default" / "docker.sock")):
        assert unix_socket_verdict(got, "network-outbound", path) == "allow", path
        # Connect only: the box cannot stand in for the service behind an allowed path.
        assert unix_socket_verdict(got, "network-bind", path) == "deny", path
    assert unix_socket_verdict(got, "network-outbound", DOCKER) == "deny"
    assert unix_socket_verdict(got, "network-outbound", "/private/tmp/agent.sock2") == "deny"


def test_no_allowed_socket_no_socket_parameter(tmp_path: Path) -> None:
    got = parts(seatbelt.plan(make_policy(tmp_path, network=True), ("/bin/true",)))
    assert not [n for n in got.definitions if n.startswith("UNIX_SOCKET_")]


def test_the_socket_rules_hold_no_path(tmp_path: Path) -> None:
    # Paths travel only as -D values: the allow-list cannot change the profile's text.
    one = seatbelt.profile(make_policy(tmp_path / "a", network=True,
                                       allow_unix_sockets=['/x") (allow default) ("']))
    (tmp_path / "b").mkdir()
    two = seatbelt.profile(make_policy(tmp_path / "b", network=True,
                                       allow_unix_sockets=["/y"]))
    assert one.text == two.text


# -- the variables that name a socket ------------------------------------------------------

SOCKET_VALUES = {
    "SSH_AUTH_SOCK": ("/private/tmp/com.apple.launchd.x/Listeners", "/private/tmp"),
    "GPG_AGENT_INFO": ("/Users/dana/.gnupg/S.gpg-agent:123:1", "/Users/dana/.gnupg"),
    "DOCKER_HOST": ("unix:///var/run/docker.sock", "/var/run/docker.sock"),
    "CONTAINER_HOST": ("unix:///run/podman/podman.sock", "/run/podman"),
    "TMUX": ("/private/tmp/tmux-501/default,4242,0", "/private/tmp/tmux-501"),
    "NVIM": ("/var/folders/ab/x/T/nvim.dana/0", "/var/folders/ab/x/T/nvim.dana"),
    "NVIM_LISTEN_ADDRESS": ("/tmp/nvimsocket", "/tmp/nvimsocket"),
    "VSCODE_IPC_HOOK_CLI": ("/var/folders/ab/x/T/vscode-ipc-1.sock", "/var/folders/ab/x/T"),
    "VSCODE_IPC_HOOK": ("/Users/dana/Library/Code/1.sock", "/Users/dana/Library/Code"),
    "VSCODE_GIT_IPC_HANDLE": ("/var/folders/ab/x/T/vscode-git-1.sock",
                              "/var/folders/ab/x/T/vscode-git-1.sock"),
    "KITTY_LISTEN_ON": ("unix:/tmp/kitty-1", "/tmp/kitty-1"),
    "WEZTERM_UNIX_SOCKET": ("/Users/dana/.local/share/wezterm/sock",
                            "/Users/dana/.local/share/wezterm"),
}


def test_every_socket_variable_has_a_case() -> None:
    assert {name for name, _ in sockets.SOCKET_VARS} == set(SOCKET_VALUES)


@pytest.mark.parametrize("name", sorted(SOCKET_VALUES))
def test_a_socket_variable_reaches_the_box_only_when_its_socket_is_allowed(
    tmp_path: Path, name: str
) -> None:
    value, allowed = SOCKET_VALUES[name]
    env = dict(ENV, **{name: value})
    shut = seatbelt.plan(make_policy(tmp_path / "a", env=env), ("/bin/true",))
    assert name not in shut.env
    (tmp_path / "b").mkdir()
    opened = seatbelt.plan(make_policy(tmp_path / "b", env=env, allow_unix_sockets=[allowed]),
                           ("/bin/true",))
    assert opened.env[name] == value


def test_the_linux_box_drops_them_too_and_host_hooks_keep_them(tmp_path: Path) -> None:
    env = dict(ENV, SSH_AUTH_SOCK="/run/user/1000/keyring/ssh", TMUX="/tmp/tmux-0/default,1,0")
    policy = make_policy(tmp_path, env=env, platform="linux",
                         allow_unix_sockets=["/run/user/1000/keyring"])
    boxed = box_env(policy)
    assert boxed["SSH_AUTH_SOCK"] == "/run/user/1000/keyring/ssh"
    assert "TMUX" not in boxed
    assert host_env(policy)["TMUX"] == "/tmp/tmux-0/default,1,0"


@pytest.mark.parametrize(("value", "form", "path"), [
    ("tcp://127.0.0.1:2375", "unix://", ""),           # not a Unix socket: the network's
    ("ssh://me@host", "unix://", ""),
    ("tcp:localhost:1234", "unix:", ""),
    ("unix:@kitty", "unix:", None),                     # abstract: no path to allow
    ("relative/agent.sock", "path", None),              # could mean anything: refused
    ("", "path", None),
    ("npipe:////./pipe/docker", "unix://", ""),
])
def test_socket_values_that_name_no_path(value: str, form: sockets.Form,
                                         path: str | None) -> None:
    assert sockets.socket_path(value, form) == path


def test_a_tcp_docker_host_is_kept(tmp_path: Path) -> None:
    env = dict(ENV, DOCKER_HOST="tcp://127.0.0.1:2375")
    p = seatbelt.plan(make_policy(tmp_path, env=env), ("/bin/true",))
    assert p.env["DOCKER_HOST"] == "tcp://127.0.0.1:2375"


def test_an_allowed_folder_covers_the_socket_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "agent"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert sockets.is_allowed(str(tmp_path / "link" / "s.sock"), [str(real)])
    assert not sockets.is_allowed(str(tmp_path / "agent2" / "s.sock"), [str(real)])


# -- case-folded protection ---------------------------------------------------------------


def test_a_folded_regex_matches_every_case_and_nothing_else() -> None:
    rx = seatbelt.folded_regex("/Users/dana/p.x/.git/hooks", below=True)
    assert rx == ("^/[uU][sS][eE][rR][sS]/[dD][aA][nN][aA]/[pP]\\.[xX]/\\.[gG][iI][tT]/"
                  "[hH][oO][oO][kK][sS](/.*)?$")
    for hit in ("/Users/dana/p.x/.git/hooks", "/users/DANA/P.X/.GIT/HOOKS/pre-commit",
                "/Users/dana/p.x/.git/Hooks/x/y"):
        assert re.search(rx, hit), hit
    for miss in ("/Users/dana/pyx/.git/hooks", "/Users/dana/p.x/.git/hooksy",
                 "/Users/dana/p.x/.git/hook", "/x/Users/dana/p.x/.git/hooks"):
        assert not re.search(rx, miss), miss


def test_a_folded_regex_of_the_folder_itself_stops_there() -> None:
    rx = seatbelt.folded_regex("/P/.git", below=False)
    assert re.search(rx, "/p/.GIT") and not re.search(rx, "/p/.git/hooks")


@pytest.mark.parametrize("name", ["a+b", "(x)", "[y]", "q?", "s*", "d$", "c^", "p|q",
                                  "b\\s", "{n}", "ünï"])
def test_hostile_names_stay_literal_in_a_folded_regex(name: str) -> None:
    rx = seatbelt.folded_regex(f"/h/{name}/.ssh", below=True)
    assert re.fullmatch(rx.lstrip("^").rstrip("$").replace("(/.*)?", ""), f"/h/{name}/.ssh")
    assert re.search(rx, f"/H/{name.upper()}/.SSH/id") or not name.isascii()
    assert not re.search(rx, f"/h/{name}x/.ssh")


def test_off_macos_protected_and_hidden_paths_are_folded(tmp_path: Path) -> None:
    secret = tmp_path / "home" / ".aws"
    secret.mkdir(parents=True)
    got = parts(seatbelt.plan(make_policy(tmp_path, hidden=["~/.aws"]), ("/bin/true",)))
    (write_deny,) = rules(got.session, "deny", "file-write*")
    (read_deny,) = rules(got.session, "deny", "file-read*")
    hooks = private(tmp_path / "proj" / ".git" / "hooks")
    for spelling in (hooks, hooks.upper(), hooks[:-5] + "HOOKS/pre-commit"):
        assert got.matches(write_deny, spelling), spelling
    assert got.matches(read_deny, private(secret).swapcase() + "/credentials")
    (unlink,) = rules(got.session, "deny", "file-write-unlink")
    assert got.matches(unlink, private(tmp_path / "proj" / ".GIT"))
    assert all(n.split("_")[-2] == "RX" for n in got.definitions
               if n.startswith(("PROTECTED", "HIDDEN", "ANCESTOR")))


def test_folding_is_decided_per_path(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    policy = make_policy(tmp_path, hidden=[str(vault)])
    prof = seatbelt.profile(policy, folds=lambda p: "vault" not in p)
    names = dict(prof.params)
    assert names["HIDDEN_0"] == private(vault)
    assert not [n for n in names if n.startswith("HIDDEN_RX_")]
    assert [n for n in names if n.startswith("PROTECTED_RX_")]
    exact = seatbelt.profile(policy, folds=lambda _p: False)
    assert "(regex (param" not in exact.text[len(seatbelt.base_profile()):]


def test_the_git_names_the_policy_protects_are_all_folded(tmp_path: Path) -> None:
    # Data-driven: whatever the policy protects (the git work adds config.worktree,
    # gitdir, worktrees' files) gets the same rule, in any case.
    policy = make_policy(tmp_path)
    git = Path(policy.project) / ".git"
    names = ("hooks", "config", "config.worktree", "commondir", "worktrees/wt/gitdir")
    policy = policy._replace(protected=tuple(str(git / n) for n in names))
    got = parts(seatbelt.plan(policy, ("/bin/true",)))
    (deny,) = rules(got.session, "deny", "file-write*")
    for n in names:
        assert got.matches(deny, private(git / n.upper())), n
    assert not got.matches(deny, private(git / "CONFIG.lock"))


def test_case_insensitivity_is_asked_of_the_disk(tmp_path: Path) -> None:
    (tmp_path / "MixedCase").mkdir()
    expected = (tmp_path / "mixedcase").exists()
    assert seatbelt.case_insensitive(str(tmp_path / "MixedCase" / "not-yet")) is expected
    assert seatbelt.case_insensitive(str(tmp_path / "MixedCase")) is expected


def test_a_disk_that_cannot_be_asked_counts_as_ignoring_case() -> None:
    # "/" has no letter to swap: the stricter rule.
    assert seatbelt.case_insensitive("/") is True


# -- the allowances real tools need ---------------------------------------------------------


def base_forms() -> list[object]:
    return list(read_profile(seatbelt.base_profile()))


def test_pseudo_terminals_are_allowed_only_for_the_boxs_own() -> None:
    forms = base_forms()
    assert [Sym("allow"), Sym("pseudo-tty")] in forms
    assert [Sym("allow"), Sym("file-read*"), Sym("file-write*"), Sym("file-ioctl"),
            [Sym("literal"), Str("/dev/ptmx")]] in forms
    assert [Sym("allow"), Sym("file-read*"), Sym("file-write*"),
            [Sym("require-all"), [Sym("regex"), Str("^/dev/ttys[0-9]+$")],
             [Sym("extension"), Str("com.apple.sandbox.pty")]]] in forms


def test_openmp_registers_its_runtime() -> None:
    text = seatbelt.base_profile()
    assert '(ipc-posix-name-regex #"^/__KMP_REGISTERED_LIB_[0-9]+$")' in text
    assert re.fullmatch("^/__KMP_REGISTERED_LIB_[0-9]+$", "/__KMP_REGISTERED_LIB_4242")


def sysctls() -> set[tuple[str, str]]:
    out = set()
    for form in base_forms():
        assert isinstance(form, list)
        if form[:2] == [Sym("allow"), Sym("sysctl-read")]:
            for f in form[2:]:
                assert isinstance(f, list) and isinstance(f[0], Sym) and isinstance(f[1], Str)
                out.add((f[0].name, f[1].value))
    return out


def test_process_listing_and_interfaces_but_no_command_lines() -> None:
    allowed = sysctls()
    assert ("sysctl-name-prefix", "kern.proc.all") in allowed
    assert ("sysctl-name-prefix", "net.routetable.") in allowed
    assert not [v for _, v in allowed if v.startswith(("kern.procargs", "kern.proc.args"))]


def test_preferences_power_and_their_services_only() -> None:
    text = seatbelt.base_profile()
    for service in ("com.apple.cfprefsd.daemon", "com.apple.cfprefsd.agent",
                    "com.apple.PowerManagement.control"):
        assert f'(global-name "{service}")' in text
    assert '(ipc-posix-name-prefix "apple.cfprefs.")' in text
    assert not [f for f in base_forms() if isinstance(f, list)
                and Sym("user-preference-write") in f]
    assert '(iokit-registry-entry-class "RootDomainUserClient")' in text


def test_the_network_rules_come_only_with_the_network(tmp_path: Path) -> None:
    off = seatbelt.profile(make_policy(tmp_path / "a")).text
    (tmp_path / "b").mkdir()
    on = seatbelt.profile(make_policy(tmp_path / "b", network=True)).text
    assert seatbelt.network_profile() not in off
    assert seatbelt.network_profile() in on
    assert "com.apple.SystemConfiguration.configd" not in off


# -- /tmp: not the box's; a hook there is fine until [sandbox] writable names it -----------


def test_tmp_is_not_a_writable_root_of_the_macos_box(tmp_path: Path) -> None:
    prof = seatbelt.profile(make_policy(tmp_path))
    roots = {v for n, v in prof.params if n.startswith("WRITABLE_ROOT_")}
    assert "/private/tmp" not in roots and "/tmp" not in roots


def test_a_hook_under_tmp_is_refused_once_tmp_is_writable(tmp_path: Path) -> None:
    hook_dir = Path("/tmp") / f"hs-hook-{os.getpid()}"
    hook_dir.mkdir(exist_ok=True)
    hook = hook_dir / "check.sh"
    hook.write_text("#!/bin/sh\n")
    try:
        plain = make_policy(tmp_path)
        assert plain.guard(boxed=True).check(str(hook), "/").ok
        opened = make_policy(tmp_path, writable=["/tmp"])
        verdict = opened.guard(boxed=True).check(str(hook), "/")
        assert not verdict.ok
        assert verdict.refusal("h") == (
            f"hook h: {hook} is in a writable folder (/tmp), so the agent could change it. "
            "Move it outside (for example ~/.local/share/harness/hooks/), or start with "
            "--no-hooks.")
        assert ("WRITABLE_ROOT_3", "/private/tmp") in seatbelt.profile(opened).params
    finally:
        hook.unlink()
        hook_dir.rmdir()


# -- the user temp folder, from the system ------------------------------------------------


def user_folders(root: Path, *, mode: int = 0o700) -> tuple[Path, Path]:
    folders = root / "private" / "var" / "folders"
    t = folders / "ab" / "xyz123" / "T"
    t.mkdir(parents=True)
    os.chmod(t, mode)
    return folders, t


def test_the_per_user_temp_folder_is_accepted(tmp_path: Path) -> None:
    folders, t = user_folders(tmp_path)
    got = usertmp.check_user_temp_dir(str(t) + "/", uid=os.getuid(), folders=str(folders))
    assert got == str(t)


@pytest.mark.parametrize("given", ["/tmp", "/Users/dana", "/private/var/folders/ab/T",
                                   "/private/var/folders/ab/xyz/T/sub", "/var/tmp/x/y/T"])
def test_a_folder_of_another_form_is_refused(given: str) -> None:
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir(given, uid=os.getuid())
    assert str(e.value) == (
        f"the user temp folder {given} is not a per-user folder of the form "
        "/private/var/folders/…/T; the box uses neither TMPDIR nor /tmp instead")


def test_var_is_read_as_private_var() -> None:
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir("/var/folders/zz/none-here/T", uid=os.getuid())
    assert str(e.value) == ("the user temp folder /var/folders/zz/none-here/T cannot be used: "
                            "No such file or directory; the box uses neither TMPDIR nor /tmp "
                            "instead")


def test_a_user_temp_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folders, t = user_folders(tmp_path)
    other = os.getuid() + 1
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir(str(t), uid=other, folders=str(folders))
    assert str(e.value) == (f"the user temp folder {t} belongs to uid {os.getuid()}, not to "
                            f"you (uid {other}); the box uses neither TMPDIR nor /tmp instead")


def test_a_user_temp_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folders, t = user_folders(tmp_path, mode=0o777)
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir(str(t), uid=os.getuid(), folders=str(folders))
    assert str(e.value) == (f"the user temp folder {t} has mode 0777, writable by others; "
                            "the box uses neither TMPDIR nor /tmp instead")


def test_a_user_temp_folder_reached_through_a_link_is_refused(tmp_path: Path) -> None:
    folders, t = user_folders(tmp_path)
    (folders / "cd").symlink_to(folders / "ab")
    linked = folders / "cd" / "xyz123" / "T"
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir(str(linked), uid=os.getuid(), folders=str(folders))
    assert str(e.value) == (f"the user temp folder {linked} leads through a link (to {t}); "
                            "the box uses neither TMPDIR nor /tmp instead")


def test_a_user_temp_file_is_refused(tmp_path: Path) -> None:
    folders = tmp_path / "f"
    (folders / "ab" / "x").mkdir(parents=True)
    (folders / "ab" / "x" / "T").write_text("")
    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir(str(folders / "ab/x/T"), uid=os.getuid(), folders=str(folders))
    assert str(e.value) == (f"the user temp folder {folders}/ab/x/T is not a folder; "
                            "the box uses neither TMPDIR nor /tmp instead")


def test_confstr_through_ctypes_agrees_with_the_c_library() -> None:
    name = os.confstr_names["CS_PATH"]
    assert usertmp.confstr(name) == os.confstr("CS_PATH")
    assert usertmp.confstr(usertmp.CS_DARWIN_USER_TEMP_DIR if sys.platform != "darwin"
                          else -1) is None


def test_off_a_mac_a_macos_plan_keeps_the_environments_tmpdir() -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS the system is asked (test_seatbelt_macos.py)")
    got = usertmp.session_user_tmp({"TMPDIR": "/var/folders/q/r/T/"}, platform="darwin",
                                  boxed=True, fallback="/tmp")
    assert got == "/var/folders/q/r/T/"
    assert usertmp.session_user_tmp({}, platform="darwin", boxed=False,
                                   fallback="/tmp") == "/tmp"


# -- a harness already in a sandbox does not start ---------------------------------------


def test_a_harness_inside_seatbelt_is_refused_with_the_reason() -> None:
    with pytest.raises(SandboxUnavailable) as e:
        darwin.require_seatbelt(program=sys.executable, nested=True)
    assert e.value.diagnosis == (
        "the harness already runs inside a macOS sandbox (Seatbelt), where sandbox-exec "
        "cannot apply the box's profile")
    assert e.value.fix == ("start the harness outside any sandbox, or set [sandbox] "
                           "enabled = false to run every hook on the host with no box")


def test_without_sandbox_exec_there_is_no_box(tmp_path: Path) -> None:
    missing = str(tmp_path / "sandbox-exec")
    with pytest.raises(SandboxUnavailable) as e:
        darwin.require_seatbelt(program=missing, nested=False)
    assert e.value.diagnosis == f"{missing} is missing or not executable"
    assert e.value.fix == "the macOS box needs the system's sandbox-exec"


def test_outside_any_sandbox_sandbox_exec_is_used() -> None:
    assert darwin.require_seatbelt(program=sys.executable, nested=False) == sys.executable


def test_policy_allow_unix_sockets_are_absolute_with_home_expanded(tmp_path: Path) -> None:
    project = make_project(tmp_path, "p2")
    policy = Policy.create(str(project), private_tmp=str(tmp_path), home="/Users/dana",
                           env=dict(ENV), platform="darwin",
                           allow_unix_sockets=["~/.colima/docker.sock", "/run/x"])
    assert policy.allow_unix_sockets == ("/Users/dana/.colima/docker.sock", "/run/x")


def test_allow_unix_sockets_flows_from_the_sandbox_table_to_the_policy(tmp_path: Path) -> None:
    from sandbox.settings import SandboxSettings

    project = make_project(tmp_path, "p3")
    settings = SandboxSettings(hide_defaults=False, allow_unix_sockets=("~/.colima",))
    policy = Policy.from_settings(str(project), settings, private_tmp=str(tmp_path),
                                  env=dict(ENV, HOME=str(tmp_path / "home")))
    assert policy.allow_unix_sockets == (str(tmp_path / "home" / ".colima"),)


def test_xcruns_cache_in_the_user_temp_folder_cannot_be_written(tmp_path: Path) -> None:
    # /usr/bin/git, cc and make are xcrun shims that look tools up in this cache.
    got = parts(seatbelt.plan(make_policy(tmp_path), ("/bin/true",)))
    (deny,) = rules(got.session, "deny", "file-write*")
    cache = seatbelt.canonical(os.path.join(got_user_tmp(tmp_path), "xcrun_db"))
    assert got.matches(deny, cache)
    assert not got.matches(deny, cache + "-x1")
    assert not got.matches(deny, os.path.dirname(cache) + "/other")


def got_user_tmp(tmp_path: Path) -> str:
    return make_policy(tmp_path).tmpdir


def test_a_session_builds_its_profile_once(tmp_path: Path) -> None:
    # Like bwrap's mounts: a link made in the project after the first run cannot move a
    # rule, since where each path leads was taken then.
    from sandbox.macos.seatbelt import SeatbeltBackend

    policy = make_policy(tmp_path)
    backend = SeatbeltBackend(policy)
    first = backend.plan(["/bin/true"])
    hooks = Path(policy.project) / ".git" / "hooks"
    hooks.rename(hooks.with_name("hooks-real"))
    hooks.symlink_to(tmp_path / "elsewhere")
    second = backend.plan(["/bin/echo", "x"])
    assert first.argv[2] is second.argv[2]
    assert first.argv[3:first.argv.index("--")] == second.argv[3:second.argv.index("--")]
    assert parts(second).command == ["/bin/echo", "x"]


def test_a_user_temp_folder_refusal_does_not_blame_the_config(tmp_path: Path) -> None:
    from launchers.cli.common import policy_error_line
    from launchers.config import Config

    with pytest.raises(PolicyError) as e:
        usertmp.check_user_temp_dir("/Users/dana", uid=os.getuid())
    assert policy_error_line(e.value, Config(path="/home/dana/.config/harness/config.toml")) == (
        "the user temp folder /Users/dana is not a per-user folder of the form "
        "/private/var/folders/…/T; the box uses neither TMPDIR nor /tmp instead.")
