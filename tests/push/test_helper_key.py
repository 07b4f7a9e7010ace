"""``[push_helper] ssh_key``: the push helper's account's alone, or refused naming the key."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from agentc.push import helper as push


def test_a_key_only_its_account_can_read_is_accepted_and_any_other_is_named(
    tmp_path: Path,
) -> None:
    me = pwd.getpwuid(os.getuid())
    key = tmp_path / "key"
    key.write_text("not a real key\n")
    key.chmod(0o400)
    assert push.key_problems(key, me) == []
    key.chmod(0o600)
    assert push.key_problems(key, me) == []
    key.chmod(0o640)
    [problem] = push.key_problems(key, me)
    assert f"push_helper.ssh_key {key} has mode 0640: only {me.pw_name} may read it" in problem
    key.chmod(0o400)
    fields = list(me)
    fields[0], fields[2] = "someone-else", me.pw_uid + 1
    other = pwd.struct_passwd(fields)
    [problem] = push.key_problems(key, other)
    assert f"is owned by uid {me.pw_uid}, not by the push helper's account someone-else" in problem
    link = tmp_path / "link"
    link.symlink_to(key)
    [problem] = push.key_problems(link, me)
    assert "must be a regular file with one link, not a link" in problem
    os.link(key, tmp_path / "second")
    [problem] = push.key_problems(key, me)
    assert "must be a regular file with one link" in problem
    [problem] = push.key_problems(tmp_path / "missing", me)
    assert f"push_helper.ssh_key {tmp_path / 'missing'}: No such file" in problem


def test_the_known_hosts_file_is_changed_by_its_owner_only(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid())
    hosts = tmp_path / "known_hosts"
    hosts.write_text("[127.0.0.1]:2222 ssh-ed25519 AAAA\n")
    hosts.chmod(0o644)
    assert push.known_hosts_problems(hosts, me) == []
    hosts.chmod(0o664)
    [problem] = push.known_hosts_problems(hosts, me)
    assert f"push_helper.known_hosts {hosts} has mode 0664: no one but its owner" in problem
    hosts.chmod(0o644)
    link = tmp_path / "link"
    link.symlink_to(hosts)
    [problem] = push.known_hosts_problems(link, me)
    assert "must be a regular file with one link" in problem
    fields = list(me)
    fields[0], fields[2] = "someone-else", me.pw_uid + 1
    if me.pw_uid != 0:  # root's file is always accepted
        [problem] = push.known_hosts_problems(hosts, pwd.struct_passwd(fields))
        assert f"is owned by uid {me.pw_uid}: root or someone-else must own it" in problem
    [problem] = push.known_hosts_problems(tmp_path / "missing", me)
    assert "No such file" in problem
