import copy
import pickle

import pytest

from composer.core.versioned_list import VersionedList


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
def test_every_change_counts_once(change, expected):
    items = VersionedList([1, 2, 3])
    assert items.version == 0
    change(items)
    assert items == expected
    assert items.version == 1


def test_a_failed_change_does_not_count():
    items = VersionedList([1, 2])
    with pytest.raises(ValueError):
        items.remove(3)
    with pytest.raises(IndexError):
        items.pop(5)
    assert items.version == 0


def test_reading_does_not_count_and_behaves_as_a_list():
    items = VersionedList([3, 1, 2])
    assert len(items) == 3 and items[0] == 3 and list(items) == [3, 1, 2] and 2 in items
    assert sorted(items) == [1, 2, 3] and items[1:] == [1, 2]
    assert items.version == 0


def test_copies_and_pickles_keep_the_items_and_start_counting_again():
    items = VersionedList([1, 2])
    items.append(3)
    for clone in (copy.copy(items), copy.deepcopy(items), pickle.loads(pickle.dumps(items))):
        assert isinstance(clone, VersionedList) and clone == [1, 2, 3] and clone.version == 0
