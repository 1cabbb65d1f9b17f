from urllib.parse import unquote

from nmt_cli.serving.kept_files import KeptFiles, clean_name, url_path


def test_names_lose_control_characters_and_urls_carry_them_percent_encoded():
    assert clean_name("../../etc\\pass\x00wd\x1b\u202etxt.txt") == "passwdtxt.txt"
    for name in ("a?x=1#f.txt", "%2e%2e%2fpasswd.txt", "my notes é.txt", "日本.html"):
        path = url_path("abc", name)
        assert all(c not in path for c in "?#/ ") and path.isascii()
        assert unquote(path) == f"abc.{name}"  # what the server's router sees


def test_each_client_keeps_its_own_files_and_files_expire():
    kept = KeptFiles(seconds=60, per_client=3)
    mine = kept.keep("me", "a.txt", b"mine", now=0)
    theirs = [kept.keep("them", f"{k}.txt", b"x", now=1) for k in range(50)]
    assert kept.get(f"{mine}.a.txt", now=2).content == b"mine"  # 50 uploads of another
    assert [kept.get(t, now=2) is not None for t in theirs] == [False] * 47 + [True] * 3
    assert kept.get(mine, now=60) is None  # expired by time
    assert kept.get(theirs[-1], now=60.5).name == "49.txt"
    assert kept.get("not-an-id.a.txt", now=2) is None


def test_all_files_together_are_bounded_and_the_largest_holder_gives_way():
    kept = KeptFiles(seconds=60, per_client=100, most_bytes=100, most_files=10)
    small = kept.keep("small", "s.txt", b"s" * 10, now=0)
    big = [kept.keep("big", f"{k}.txt", b"b" * 30, now=0) for k in range(5)]
    assert kept.size <= 100 and kept.get(small, now=1) is not None
    assert kept.get(big[-1], now=1) is not None and kept.get(big[0], now=1) is None
    many = [kept.keep(f"client{k}", "m.txt", b"", now=0) for k in range(20)]
    assert len(kept.files) == 10 and kept.get(many[-1], now=1) is not None
