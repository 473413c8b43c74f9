"""The macOS plan, checked on any machine: the profile's text, its parameters, the
environment, and the macOS rules of the writable set.

These build plans for macOS without running them (that is test_seatbelt_macos.py). Off
macOS nothing on disk is consulted for canonical paths, so /tmp/x becomes
/private/tmp/x here exactly as it would on a Mac.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers.seatbelt_profile import (
    ENV,
    Parts,
    ProfileSyntaxError,
    Str,
    Sym,
    filters_of,
    make_plan,
    make_policy,
    make_project,
    param_filters,
    params_used,
    parts,
    private,
    read_profile,
    rules,
    user_tmp,
    walk,
)

from pathguard import zones as z
from sandbox.macos import seatbelt
from sandbox.policy import Policy
from sandbox.policy.env import PROVIDER_KEYS

# -- the plan's shape ------------------------------------------------------------------------


def test_plan_runs_the_fixed_sandbox_exec_with_the_profile_inline(tmp_path: Path) -> None:
    p = make_plan(make_policy(tmp_path))
    assert p.backend == "seatbelt"
    assert p.argv[0] == "/usr/bin/sandbox-exec"
    assert p.argv[1] == "-p"
    assert p.argv[2].startswith("(version 1)\n"), p.argv[2][:80]


def test_command_follows_a_double_dash_after_the_definitions(tmp_path: Path) -> None:
    p = make_plan(make_policy(tmp_path), ("/bin/sh", "-c", "echo -Dx=y -- z"))
    got = parts(p)
    assert got.command == ["/bin/sh", "-c", "echo -Dx=y -- z"]
    assert p.argv[-4] == "--"


def test_cwd_is_the_project(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    assert make_plan(policy).cwd == policy.project


def test_description_names_the_command_not_the_box(tmp_path: Path) -> None:
    p = make_plan(make_policy(tmp_path), ("/bin/echo", "a b"))
    assert p.description == "/bin/echo 'a b'"


def test_empty_command_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as e:
        seatbelt.plan(make_policy(tmp_path), ())
    assert str(e.value) == "an empty command cannot run in the box"


def test_a_bare_program_name_is_left_for_the_boxs_path(tmp_path: Path) -> None:
    # sandbox-exec looks it up after the profile applies, on the box's PATH.
    p = seatbelt.plan(make_policy(tmp_path), ("git", "status"))
    assert parts(p).command == ["git", "status"]


def test_base_profile_is_package_data() -> None:
    from importlib import resources

    text = resources.files("sandbox.macos").joinpath("seatbelt_base.sbpl").read_text("utf-8")
    assert seatbelt.base_profile() == text


# -- the profile is well formed ----------------------------------------------------------


def test_profile_is_well_formed(tmp_path: Path) -> None:
    policy = make_policy(tmp_path, hidden=[str(tmp_path / "proj" / ".git" / "config")])
    forms = parts(make_plan(policy)).forms
    assert forms[0] == [Sym("version"), Sym("1")]
    assert forms[1] == [Sym("deny"), Sym("default")]
    assert all(isinstance(f, list) for f in forms)


def test_reader_rejects_what_sandbox_exec_would_reject() -> None:
    # The checks above mean something only if the reader can fail.
    for bad in ['(allow file-read*', "(deny default))", '(param "X)', '(a "b\\']:
        with pytest.raises(ProfileSyntaxError):
            read_profile(bad)
    assert read_profile('(a "x\\"y" #"^/dev/[0-9]+$") ; (not read') == [
        [Sym("a"), Str('x"y'), Str("^/dev/[0-9]+$")]
    ]


def test_every_parameter_used_is_defined_and_every_definition_is_used(tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    secret = tmp_path / "secret"
    secret.mkdir()
    policy = make_policy(tmp_path, writable=[str(extra)], hidden=[str(secret)], network=True)
    got = parts(make_plan(policy))
    assert params_used(got.forms) == set(got.definitions)


def test_session_rules_hold_no_string_but_parameter_names(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    got = parts(make_plan(make_policy(tmp_path, hidden=[str(secret)])))
    session = read_profile(got.profile[len(seatbelt.base_profile()) :])
    strings = []
    for form in walk(session):
        strings += [x.value for x in form if isinstance(x, Str)]
    assert strings and set(strings) <= set(got.definitions)


def test_no_file_rule_lacks_a_filter(tmp_path: Path) -> None:
    # "(allow file-write*)" with no filter would open the whole disk.
    policy = make_policy(tmp_path, project=make_project(tmp_path, git=False))
    forms = parts(make_plan(policy)).forms
    for form in forms:
        assert isinstance(form, list)
        if form[0] in (Sym("allow"), Sym("deny")) and any(
            isinstance(op, Sym) and op.name.startswith("file-write") for op in form[1:]
        ):
            assert filters_of(form), form


# -- each part of the policy gives its rule ------------------------------------------------


def writable_params(got: Parts) -> set[str]:
    (rule,) = rules(got.session, "allow", "file-write*")
    kinds = param_filters(rule)
    assert {k for k, _ in kinds} == {"subpath"}
    return {got.definitions[name] for _, name in kinds}


def test_project_and_private_temp_folder_are_writable_roots(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    roots = writable_params(got)
    assert private(tmp_path / "proj") in roots
    assert private(tmp_path / "ptmp") in roots


def test_the_user_temp_folder_is_a_writable_root(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    assert seatbelt.canonical(user_tmp()) in writable_params(got)


def test_sandbox_writable_entries_are_writable_roots(tmp_path: Path) -> None:
    extra = tmp_path / "cache"
    extra.mkdir()
    got = parts(make_plan(make_policy(tmp_path, writable=[str(extra)])))
    assert private(extra) in writable_params(got)


def test_a_worktrees_common_directory_is_a_writable_root(tmp_path: Path) -> None:
    main = make_project(tmp_path, "main")
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    (main / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    (main / ".git" / "worktrees" / "wt" / "gitdir").write_text(f"{wt / '.git'}\n")
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    policy = make_policy(tmp_path, project=wt)
    assert policy.common_dir == str(main / ".git")
    got = parts(make_plan(policy))
    assert private(main / ".git") in writable_params(got)
    # Its hooks are protected like the project's own.
    (deny,) = rules(got.session, "deny", "file-write*")
    assert got.matches(deny, private(main / ".git" / "hooks" / "pre-commit"))


def test_nothing_else_is_a_writable_root(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    assert writable_params(got) == {
        private(tmp_path / "proj"),
        private(tmp_path / "ptmp"),
        seatbelt.canonical(user_tmp()),
    }


def test_a_hidden_folder_is_denied_for_reading_and_writing(tmp_path: Path) -> None:
    secret = tmp_path / "home" / ".aws"
    secret.mkdir(parents=True)
    got = parts(make_plan(make_policy(tmp_path, hidden=["~/.aws"])))
    (read_deny,) = rules(got.session, "deny", "file-read*")
    (write_deny,) = rules(got.session, "deny", "file-write*")
    for path in (private(secret), private(secret / "credentials")):
        assert got.matches(read_deny, path), path
        assert got.matches(write_deny, path), path
    assert not got.matches(read_deny, private(secret) + "-not")


def test_a_hidden_file_is_denied_for_reading(tmp_path: Path) -> None:
    netrc = tmp_path / "home" / ".netrc"
    netrc.parent.mkdir(parents=True)
    netrc.write_text("machine x password y\n")
    got = parts(make_plan(make_policy(tmp_path, hidden=["~/.netrc"])))
    (read_deny,) = rules(got.session, "deny", "file-read*")
    assert got.matches(read_deny, private(netrc))


def test_hidden_denies_come_after_the_read_allow(tmp_path: Path) -> None:
    # The last matching rule wins in Seatbelt: a deny before the allow would do nothing.
    secret = tmp_path / "secret"
    secret.mkdir()
    forms = parts(make_plan(make_policy(tmp_path, hidden=[str(secret)]))).forms
    allow = forms.index([Sym("allow"), Sym("file-read*")])
    (deny,) = rules(forms, "deny", "file-read*")
    assert forms.index(deny) > allow


def test_without_hidden_paths_no_read_is_denied(tmp_path: Path) -> None:
    forms = parts(make_plan(make_policy(tmp_path))).forms
    assert rules(forms, "deny", "file-read*") == []


def test_protected_paths_are_denied_for_writing(tmp_path: Path) -> None:
    policy = make_policy(tmp_path)
    got = parts(make_plan(policy))
    (deny,) = rules(got.session, "deny", "file-write*")
    for path in (tmp_path / "proj" / ".git" / "hooks", tmp_path / "proj" / ".git" / "config"):
        assert got.matches(deny, private(path)), path
        assert got.matches(deny, private(path) + "/below"), path
    assert {n for _, n in param_filters(deny)} <= {
        n for n in got.definitions if n.startswith("PROTECTED_")}
    assert not got.matches(deny, private(tmp_path / "proj" / ".git" / "HEAD"))


def test_protected_denies_come_after_the_write_allow(tmp_path: Path) -> None:
    forms = parts(make_plan(make_policy(tmp_path))).session
    (allow,) = rules(forms, "allow", "file-write*")
    (deny,) = rules(forms, "deny", "file-write*")
    assert forms.index(deny) > forms.index(allow)


def test_folders_above_protected_paths_cannot_be_unlinked_or_renamed(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    (rule,) = rules(got.session, "deny", "file-write-unlink")
    # mv .git .git2 and mv proj proj2 would carry .git/hooks out from under its rule.
    assert got.matches(rule, private(tmp_path / "proj" / ".git"))
    assert got.matches(rule, private(tmp_path / "proj"))
    # Only the folders themselves: what lies beside and below them can still go.
    assert not got.matches(rule, private(tmp_path / "proj" / "notes.txt"))
    assert not got.matches(rule, private(tmp_path / "proj" / ".git" / "index"))
    assert not got.matches(rule, "/")


def test_every_tool_config_name_is_denied_there_or_not(tmp_path: Path) -> None:
    """macOS makes no folder over a missing row: its rules deny the names themselves,
    so the box can neither make .claude/ nor write a .mcp.json that was not there."""
    got = parts(make_plan(make_policy(tmp_path, allow_tool_configs=(".vscode",))))
    (deny,) = rules(got.session, "deny", "file-write*")
    project = private(tmp_path / "proj")
    for name in (".claude", ".claude/settings.json", ".mcp.json", ".cursor/hooks.json",
                 ".envrc", "opencode.json", ".kiro/settings/mcp.json", ".roo/mcp.json",
                 ".continue/mcpServers/x.yaml", ".devcontainer.json", ".aider.conf.yml"):
        assert got.matches(deny, f"{project}/{name}"), name
    assert not got.matches(deny, f"{project}/.kiro/steering.md")  # the row is the file
    assert not got.matches(deny, f"{project}/.vscode/settings.json")  # released
    assert not got.matches(deny, f"{project}/notes.txt")


def test_what_the_host_reads_in_a_writable_home_is_denied_there_or_not(
        tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    got = parts(make_plan(make_policy(tmp_path, writable=[str(home)])))
    (deny,) = rules(got.session, "deny", "file-write*")
    for name in (".gitconfig", ".bashrc", ".bash_profile", ".config/git/config",
                 ".config/harness/config.toml", ".local/share/harness/trusted.json"):
        assert got.matches(deny, f"{private(home)}/{name}"), name
    assert not got.matches(deny, f"{private(home)}/notes.txt")


def test_folders_above_hidden_paths_cannot_be_unlinked_or_renamed(tmp_path: Path) -> None:
    project = make_project(tmp_path, git=False)
    secret = project / "vault" / "keys"
    secret.mkdir(parents=True)
    policy = make_policy(tmp_path, project=project, hidden=[str(secret)], protect=False)
    got = parts(make_plan(policy))
    (rule,) = rules(got.session, "deny", "file-write-unlink")
    assert got.matches(rule, private(tmp_path / "proj" / "vault"))


def test_protect_false_protects_nothing(tmp_path: Path) -> None:
    forms = parts(make_plan(make_policy(tmp_path, protect=False))).session
    assert rules(forms, "deny", "file-write*") == []
    assert rules(forms, "deny", "file-write-unlink") == []


def test_without_network_nothing_opens_the_network(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    for form in walk(got.forms):
        if form and form[0] == Sym("allow"):
            ops = [x.name for x in form[1:] if isinstance(x, Sym)]
            if not any(op.startswith(("network", "system-socket")) for op in ops):
                continue
            # Only Unix sockets: the socket call for AF_UNIX, and paths of the box's own.
            assert [f for f in form if isinstance(f, list)] in (
                [[Sym("socket-domain"), Sym("AF_UNIX")]],
                [[Sym("local"), Sym("unix-socket"), [Sym("subpath"),
                                                    [Sym("param"), Str("BOX_SOCKETS_0")]]]],
                [[Sym("remote"), Sym("unix-socket"), [Sym("subpath"),
                                                     [Sym("param"), Str("BOX_SOCKETS_0")]]]],
            ), form


def test_with_network_outbound_and_inbound_are_allowed(tmp_path: Path) -> None:
    forms = parts(make_plan(make_policy(tmp_path, network=True))).forms
    assert [Sym("allow"), Sym("network-outbound")] in forms
    assert [Sym("allow"), Sym("network-inbound")] in forms


def test_hard_links_are_not_allowed(tmp_path: Path) -> None:
    # A hard link to .git/config made in the project would be the same file, unprotected.
    forms = parts(make_plan(make_policy(tmp_path))).forms
    for form in walk(forms):
        if form and form[0] == Sym("allow"):
            assert Sym("file-link") not in form and Sym("file*") not in form, form


# -- hostile names ---------------------------------------------------------------------------

HOSTILE = [
    '") (allow default) ("',
    'quote"inside',
    "paren)(",
    "new\nline",
    "back\\slash",
    "back\\\"slash-quote",
    "ünïcødé-名前",
    "semi;colon",
    "-Dfake=1",
    "eq=uals",
    "--",
]


def hostile_policy(root: Path, name: str) -> Policy:
    """The same shape every time: project, one writable folder, one hidden folder."""
    root.mkdir()
    project = make_project(root, name)
    extra = root / f"w{name}"
    extra.mkdir()
    secret = root / f"h{name}"
    secret.mkdir()
    return make_policy(root, project=project, writable=[str(extra)], hidden=[str(secret)])


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(h) for h in HOSTILE])
def test_hostile_path_names_cannot_change_the_profile(tmp_path: Path, name: str) -> None:
    benign = parts(make_plan(hostile_policy(tmp_path / "a", "plain")))
    hostile_pol = hostile_policy(tmp_path / "b", name)
    hostile = parts(make_plan(hostile_pol))
    assert hostile.profile == benign.profile
    assert set(hostile.definitions) == set(benign.definitions)
    # Each value arrives whole, in its own -D argument, and nowhere else.
    project = private(hostile_pol.project)
    assert hostile.definitions["WRITABLE_ROOT_0"] == project
    assert f"-DWRITABLE_ROOT_0={project}" in hostile.definition_args
    # (The project is also pinned as the folder above .git/hooks.)
    assert hostile.names_for(project) - {"WRITABLE_ROOT_0"} <= {
        n for n in hostile.definitions if n.startswith("ANCESTOR_")
    }
    assert name not in hostile.profile
    assert not any(name in a for a in hostile.command)
    assert make_plan(hostile_pol).argv[:2] == ("/usr/bin/sandbox-exec", "-p")
    assert hostile.command == ["/bin/echo", "hi"]


def test_profile_depends_only_on_the_policys_shape(tmp_path: Path) -> None:
    one = parts(make_plan(hostile_policy(tmp_path / "one", "alpha")))
    two = parts(make_plan(hostile_policy(tmp_path / "two", "beta")))
    assert one.profile == two.profile
    assert one.definitions != two.definitions


# -- canonical paths ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/tmp", "/private/tmp"),
        ("/tmp/x", "/private/tmp/x"),
        ("/var/folders/ab/xyz/T/", "/private/var/folders/ab/xyz/T"),
        ("/etc/hosts", "/private/etc/hosts"),
        ("/tmp/a/../b", "/private/tmp/b"),
        ("//tmp//x/", "/private/tmp/x"),
    ],
)
def test_canonical_puts_tmp_var_and_etc_under_private(given: str, expected: str) -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS the real disk decides; test_seatbelt_macos.py covers it")
    assert seatbelt.canonical(given) == expected


@pytest.mark.parametrize("given", ["/tmpfoo/x", "/private/tmp/x", "/Users/dana", "/variant"])
def test_canonical_leaves_other_paths_alone(given: str) -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS the real disk decides")
    assert seatbelt.canonical(given) == given


def test_canonical_does_not_touch_the_disk_off_macos(tmp_path: Path) -> None:
    if sys.platform == "darwin":
        pytest.skip("on macOS links are resolved")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    assert seatbelt.canonical(str(link)) == private(link)


def test_canonical_refuses_a_relative_path() -> None:
    with pytest.raises(ValueError) as e:
        seatbelt.canonical("proj/x")
    assert str(e.value) == "the path proj/x is not absolute"


def test_parameters_are_canonical(tmp_path: Path) -> None:
    got = parts(make_plan(make_policy(tmp_path)))
    for name, value in got.definitions.items():
        if "_RX_" in name:
            continue  # a regex built from a canonical path (test_seatbelt_rules.py)
        assert not value.startswith(("/tmp/", "/var/", "/etc/")), value
        assert value == seatbelt.canonical(value)


# -- the environment ---------------------------------------------------------------------


@pytest.mark.parametrize("key", [*PROVIDER_KEYS, "SOMETHING_API_KEY"])
def test_provider_keys_do_not_reach_the_box(tmp_path: Path, key: str) -> None:
    env = dict(ENV, **{key: "secret-value"})
    p = make_plan(make_policy(tmp_path, env=env))
    assert key not in p.env
    assert "secret-value" not in p.env.values()


def test_env_extra_cannot_hand_the_box_a_provider_key(tmp_path: Path) -> None:
    p = seatbelt.plan(
        make_policy(tmp_path),
        ("/bin/true",),
        env_extra={"OPENAI_API_KEY": "k", "HOOK_EVENT": "PreToolUse"},
    )
    assert "OPENAI_API_KEY" not in p.env
    assert p.env["HOOK_EVENT"] == "PreToolUse"


def test_tmpdir_is_the_private_temp_folder(tmp_path: Path) -> None:
    p = make_plan(make_policy(tmp_path))
    assert p.env["TMPDIR"] == private(tmp_path / "ptmp")
    assert p.env["PATH"] == ENV["PATH"]


# -- the macOS writable set (pathguard's zones) ----------------------------------------------


def zone_set(policy: Policy, *, boxed: bool) -> set[tuple[str, str]]:
    return {(zn.path, zn.label) for zn in policy.writable_zones(boxed=boxed)}


def test_on_macos_the_user_temp_folder_is_writable_for_a_sandboxed_hook(tmp_path: Path) -> None:
    zones = zone_set(make_policy(tmp_path), boxed=True)
    assert (user_tmp(), z.USER_TMP) in zones


def test_on_macos_a_host_hook_in_a_sandboxed_session_counts_the_user_temp_folder(
    tmp_path: Path,
) -> None:
    zones = zone_set(make_policy(tmp_path), boxed=False)
    assert (user_tmp(), z.USER_TMP) in zones


def test_on_macos_the_system_temp_folders_do_not_count_in_a_sandboxed_session(
    tmp_path: Path,
) -> None:
    # Unlike bubblewrap, the macOS box does not give the agent /tmp: a hook there is fine.
    for boxed in (True, False):
        paths = {p for p, _ in zone_set(make_policy(tmp_path), boxed=boxed)}
        assert "/tmp" not in paths
        assert "/private/tmp" not in paths


def test_under_bubblewrap_a_sandboxed_hooks_tmp_counts(tmp_path: Path) -> None:
    # The contrast with the test above: the rule is macOS's, not an accident.
    zones = zone_set(make_policy(tmp_path, platform="linux"), boxed=True)
    assert ("/tmp", z.SYSTEM_TMP) in zones
    assert not [p for p, label in zones if label == z.USER_TMP]


def test_on_macos_without_a_sandbox_tmp_private_tmp_and_tmpdir_count(tmp_path: Path) -> None:
    zones = zone_set(make_policy(tmp_path, boxed=False), boxed=True)
    assert ("/tmp", z.SYSTEM_TMP) in zones
    assert ("/private/tmp", z.SYSTEM_TMP) in zones
    # With no sandbox the environment's TMPDIR counts as it is (the seed's rule).
    assert (ENV["TMPDIR"], z.USER_TMP) in zones


def test_every_writable_zone_of_a_macos_session_is_writable_in_the_box(tmp_path: Path) -> None:
    # The guard and the box must agree: what the box lets the agent write, W names.
    extra = tmp_path / "extra"
    extra.mkdir()
    policy = make_policy(tmp_path, writable=[str(extra)])
    got = parts(make_plan(policy))
    roots = writable_params(got)
    zones = {seatbelt.canonical(zn.path) for zn in policy.writable_zones(boxed=True)}
    assert roots == zones


def test_hidden_zones_of_a_macos_session_are_the_boxes_hidden_paths(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    policy = make_policy(tmp_path, hidden=[str(secret)])
    got = parts(make_plan(policy))
    (read_deny,) = rules(got.session, "deny", "file-read*")
    zones = {seatbelt.canonical(zn.path) for zn in policy.hidden_zones(boxed=True)}
    assert zones
    for zone in zones:
        assert got.matches(read_deny, zone)
    exact = seatbelt.profile(policy, folds=lambda _p: False)
    assert {v for n, v in exact.params if n.startswith("HIDDEN_")} == zones
    assert os.path.isdir(secret)


def test_a_missing_git_hooks_folder_is_denied_for_writing(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".git").mkdir(parents=True)
    (project / ".git" / "config").write_text("[core]\n")
    policy = Policy.create(str(project), private_tmp=str(tmp_path / "ptmp"),
                           hide_defaults=False, platform="darwin", env={"TMPDIR": "/var/x"})
    assert seatbelt.canonical(str(project / ".git" / "hooks")) in seatbelt.protected_paths(policy)


def test_no_set_id_mode_may_be_set_where_the_box_writes(tmp_path: Path) -> None:
    # On macOS a box started by root is root: a set-id program it left in the project
    # would run as root for any host user.
    got = parts(make_plan(make_policy(tmp_path)))
    (rule,) = rules(got.session, "deny", "file-write-setugid")
    assert {got.definitions[name] for _, name in param_filters(rule)} == \
        writable_params(got)
