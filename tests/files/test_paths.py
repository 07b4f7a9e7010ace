"""``agentc.files.paths.within``: the tree test the launch's masks and exposures share, checked
against the pathlib meaning it replaces."""

from __future__ import annotations

from pathlib import PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from agentc.files.paths import within

PART = st.sampled_from(["a", "b", "ab", "a.b", "..a", "node_modules", "x y"])
PATHS = st.lists(PART, max_size=4).map(lambda parts: PurePosixPath("/", *parts))


@given(PATHS, PATHS)
def test_within_means_the_tree_or_one_of_its_descendants(
    path: PurePosixPath, tree: PurePosixPath
) -> None:
    assert within(path, tree) == (path == tree or tree in path.parents)


def test_a_sibling_with_the_same_prefix_is_not_inside() -> None:
    assert not within("/home/ab", "/home/a")
    assert within("/home/a/b", "/home/a") and within("/home/a", "/home/a")
    assert within("/anything", "/")
