"""The verify checker catches each kind of violation (it must be able to fail)."""

from __future__ import annotations

from magnetar.verify.history import Delivery, History, Send, check

T = "persistent://public/default/t"
SUB = f"{T}|s"


def history(*deliveries: Delivery, sends: tuple[Send, ...] = ()) -> History:
    h = History()
    h.subscriptions_by_topic[T].append(SUB)
    h.exclusive_subscriptions.add(SUB)
    for s in sends:
        h.send(s)
    for d in deliveries:
        h.deliver(d)
    return h


def send(i: int, entry: int) -> Send:
    return Send("p", i, f"m{i}", (0, entry, -1, -1), T)


def delivery(i: int, entry: int, redelivered: int = 0) -> Delivery:
    return Delivery(SUB, "c", (0, entry, -1, -1), f"m{i}", redelivered, "")


def test_clean_history_passes() -> None:
    assert check(history(delivery(0, 0), delivery(1, 1), sends=(send(0, 0), send(1, 1)))).ok


def test_lost_message_is_caught() -> None:
    verdict = check(history(delivery(0, 0), sends=(send(0, 0), send(1, 1))))
    assert len(verdict.lost) == 1 and not verdict.ok


def test_fresh_duplicate_is_caught_but_redelivery_is_not() -> None:
    assert check(history(delivery(0, 0), delivery(0, 0, redelivered=1), sends=(send(0, 0),))).ok
    verdict = check(history(delivery(0, 0), delivery(0, 0), sends=(send(0, 0),)))
    assert verdict.duplicated and not verdict.ok


def test_producer_and_exclusive_order_violations_are_caught() -> None:
    verdict = check(history(delivery(1, 1), delivery(0, 0), sends=(send(0, 1), send(1, 0))))
    assert len(verdict.order_violations) == 2


def test_cursor_moving_backwards_is_caught() -> None:
    h = history()
    h.cursor_positions[SUB] = [0, 5, 3]
    assert check(h).cursor_backwards == [f"{SUB}: mark-delete 5 -> 3"]
