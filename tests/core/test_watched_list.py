import copy
import pickle

import pytest

from composer.core.watched_list import WatchedList


@pytest.mark.parametrize(
    "change,expected",
    [
        (lambda xs: xs.append(4), [1, 2, 3, 4]),
        (lambda xs: xs.extend([4, 5]), [1, 2, 3, 4, 5]),
        (lambda xs: xs.insert(0, 0), [0, 1, 2, 3]),
        (lambda xs: xs.remove(2), [1, 3]),
        (lambda xs: xs.pop(), [1, 2]),
        (lambda xs: xs.clear(), []),
        (lambda xs: xs.sort(reverse=True), [3, 2, 1]),
        (lambda xs: xs.reverse(), [3, 2, 1]),
        (lambda xs: xs.__setitem__(0, 9), [9, 2, 3]),
        (lambda xs: xs.__setitem__(slice(None), [7]), [7]),
        (lambda xs: xs.__delitem__(0), [2, 3]),
        (lambda xs: xs.__iadd__([4]), [1, 2, 3, 4]),
        (lambda xs: xs.__imul__(2), [1, 2, 3, 1, 2, 3]),
    ],
)
def test_every_change_notifies_once_after_the_change(change, expected):
    items = WatchedList([1, 2, 3])
    seen = []
    items.watchers.append(lambda: seen.append(list(items)))
    change(items)
    assert items == expected
    assert seen == [expected]  # the watcher ran once, and saw the new contents


def test_reading_does_not_notify_and_behaves_as_a_list():
    items = WatchedList([3, 1, 2])
    items.watchers.append(lambda: pytest.fail("a read notified"))
    assert len(items) == 3 and items[0] == 3 and list(items) == [3, 1, 2] and 2 in items
    assert sorted(items) == [1, 2, 3] and items[1:] == [1, 2]


def test_copies_and_pickles_keep_the_items_not_the_watchers():
    items = WatchedList([1, 2])
    items.watchers.append(lambda: None)
    for clone in (copy.copy(items), copy.deepcopy(items), pickle.loads(pickle.dumps(items))):
        assert isinstance(clone, WatchedList) and clone == [1, 2] and clone.watchers == []
