"""The social domain plugin: every tool's behaviour, errors leave the state unchanged, prerequisites and
scratchpad writes as declared, postconditions, deterministic snapshots."""

from __future__ import annotations

import json
from typing import Any

import pytest

from forethought.kernel import toolgate
from forethought.kernel.domains import load_domain
from forethought.kernel.environment import Environment
from forethought.kernel.scratchpad import Scratchpad
from tests.domain_harness import assert_solution_verifies, solution_paths

DOM = load_domain("social")


def fresh(data: dict[str, Any] | None = None):
    return DOM.load_state(data)


def call(state, tool: str, **args) -> dict[str, Any]:
    return DOM.tools[tool](state, args)


def posting_in(user: str = "techguru", **extra):
    return fresh({"posting": {"authenticated": True, "username": user, **extra}})


def messaging_in(uid: str = "USR001", **extra):
    return fresh({"messaging": {"logged_in": True, "current_user": uid, **extra}})


def unchanged_on_error(state, tool: str, **args) -> str:
    before = DOM.snapshot(state)
    out = call(state, tool, **args)
    assert "error" in out, out
    assert DOM.snapshot(state) == before, f"{tool} mutated the state before failing"
    return out["error"]


def post_ok(tool: str, state, args: dict[str, Any], out: dict[str, Any]) -> list[str]:
    spec = DOM.tools[tool].spec
    return toolgate.postcondition(spec, DOM.tools[tool], args, out, state)


# ------------------------------------------------------------------ registry
def test_registry_shape():
    assert len(DOM.tools) >= 14
    for name, t in DOM.tools.items():
        assert t.spec.domain == "social" and t.spec.description, name
        for p in t.spec.required:
            assert t.spec.param_schema(p).get("description"), f"{name}.{p} has no description"


def test_prerequisites_and_side_effects_declared():
    posting_auth = {
        "posting_logout",
        "post_tweet",
        "retweet",
        "comment",
        "mention",
        "follow_user",
        "unfollow_user",
        "list_all_following",
    }
    message_auth = {
        "send_message",
        "view_messages_sent",
        "delete_message",
        "add_contact",
        "search_messages",
        "get_message_stats",
    }
    for name, t in DOM.tools.items():
        keys = [p.key for p in t.spec.prerequisites]
        if name in posting_auth:
            assert keys == ["posting_authenticated"], name
        elif name in message_auth:
            assert keys == ["message_authenticated"], name
        else:
            assert keys == [], name
        assert all(p.sat.op == "truthy" for p in t.spec.prerequisites)
    side = {n for n, t in DOM.tools.items() if t.spec.side_effect}
    assert side == {
        "posting_login",
        "posting_logout",
        "post_tweet",
        "retweet",
        "comment",
        "mention",
        "follow_user",
        "unfollow_user",
        "message_login",
        "send_message",
        "delete_message",
        "add_contact",
    }


def test_login_tools_establish_their_prerequisite_keys():
    # check_prerequisites may only propose a tool whose declared writes contain the key.
    writers = {
        k: sorted(n for n, t in DOM.tools.items() if k in t.spec.writes)
        for k in ("posting_authenticated", "message_authenticated")
    }
    assert writers["posting_authenticated"] == ["posting_get_login_status", "posting_login", "posting_logout"]
    assert writers["message_authenticated"] == ["message_get_login_status", "message_login"]


def test_declared_writes_resolve():
    def w(tool, args, result):
        return toolgate.declared_writes(DOM.tools[tool].spec, args, result)

    s = fresh({"posting": {"passwords": {"techguru": "pw"}}})
    out = call(s, "posting_login", username="techguru", password="pw")
    assert w("posting_login", {"username": "techguru", "password": "pw"}, out) == {  # the password is secret: not in S
        "username": "techguru",
        "posting_authenticated": True,
        "posting_user": "techguru",
    }
    bad = call(fresh(), "posting_login", username="techguru", password="nope")
    assert w("posting_login", {"username": "techguru", "password": "nope"}, bad) == {
        "username": "techguru",
        "posting_authenticated": False,
    }
    assert w("posting_logout", {}, {"logout_status": True}) == {"posting_authenticated": False}
    assert w("get_user_id", {"user": "Bob"}, call(fresh(), "get_user_id", user="Bob")) == {
        "user": "Bob",
        "user_id:Bob": "USR002",
    }
    out = call(fresh(), "get_user_tweets", username="techguru")
    assert w("get_user_tweets", {"username": "techguru"}, out)["latest_tweet:techguru"] == 9
    out = call(fresh(), "search_tweets", keyword="nothing-matches-this")
    assert "tweet_match:nothing-matches-this" not in w("search_tweets", {"keyword": "nothing-matches-this"}, out)
    out = call(fresh(), "get_tweet", tweet_id=3)
    assert w("get_tweet", {"tweet_id": 3}, out)["tweet_author"] == "chef_maria"
    out = call(messaging_in(), "search_messages", keyword="lunch")
    assert (
        w("search_messages", {"keyword": "lunch"}, out)["message_match:lunch"] == "Are we still on for lunch on Friday?"
    )
    out = call(messaging_in(), "add_contact", user_name="Eve")
    assert w("add_contact", {"user_name": "Eve"}, out)["user_id:Eve"] == "USR005"


def test_precondition_gates_on_scratchpad():
    spec = DOM.tools["post_tweet"].spec
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad({"posting_authenticated": True})) == []
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad({"posting_authenticated": False}))
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad())
    assert toolgate.precondition(spec, {"content": 5}, Scratchpad({"posting_authenticated": True}))


# ------------------------------------------------------------------- posting
def test_posting_login_status_logout():
    s = fresh({"posting": {"passwords": {"nightowl": "pw1"}}})
    assert call(s, "posting_get_login_status") == {"login_status": False}
    before = DOM.snapshot(s)
    assert call(s, "posting_login", username="nightowl", password="wrong") == {"authentication_status": False}
    assert call(s, "posting_login", username="ghost", password="pw1") == {"authentication_status": False}
    assert DOM.snapshot(s) == before
    out = call(s, "posting_login", username="nightowl", password="pw1")
    assert out == {"authentication_status": True, "username": "nightowl"}
    assert post_ok("posting_login", s, {}, out) == []
    assert call(s, "posting_get_login_status") == {"login_status": True, "username": "nightowl"}
    assert call(s, "posting_logout") == {"logout_status": True, "username": "nightowl"}
    assert s.posting.authenticated is False and s.posting.username is None
    assert "not logged in" in unchanged_on_error(s, "posting_logout")


def test_post_tweet_and_errors():
    s = posting_in("techguru")
    out = call(s, "post_tweet", content="hello", tags=["#x"], mentions=["@data_dan"])
    assert out == {"id": 10, "username": "techguru", "content": "hello", "tags": ["#x"], "mentions": ["data_dan"]}
    assert post_ok("post_tweet", s, {"content": "hello"}, out) == []
    assert call(s, "post_tweet", content="again")["id"] == 11
    assert "empty" in unchanged_on_error(s, "post_tweet", content="   ")
    assert "limit" in unchanged_on_error(s, "post_tweet", content="x" * 281)
    assert "not found" in unchanged_on_error(s, "post_tweet", content="hi", mentions=["ghost"])
    assert "not logged in" in unchanged_on_error(fresh(), "post_tweet", content="hi")


def test_tweet_counter_follows_loaded_tweets():
    s = posting_in("techguru", tweets=[{"id": 41, "username": "nightowl", "content": "a"}])
    assert s.posting.next_tweet_id == 42
    assert call(s, "post_tweet", content="b")["id"] == 42


def test_retweet_comment_mention():
    s = posting_in("bookworm")
    assert call(s, "retweet", tweet_id=2)["retweet_status"] == "Successfully retweeted"
    assert s.posting.retweets == {"bookworm": [2]}
    assert post_ok("retweet", s, {"tweet_id": 2}, {}) == []
    assert "already retweeted" in unchanged_on_error(s, "retweet", tweet_id=2)
    assert "not found" in unchanged_on_error(s, "retweet", tweet_id=99)

    assert call(s, "comment", tweet_id=2, comment_content="nice")["comment_status"] == "Comment added successfully"
    assert call(s, "get_tweet_comments", tweet_id=2) == {
        "tweet_id": 2,
        "comments": [{"username": "bookworm", "content": "nice"}],
    }
    assert post_ok("comment", s, {"tweet_id": 2, "comment_content": "nice"}, {}) == []
    assert "empty" in unchanged_on_error(s, "comment", tweet_id=2, comment_content=" ")
    assert "not found" in unchanged_on_error(s, "comment", tweet_id=50, comment_content="x")

    out = call(s, "mention", tweet_id=4, mentioned_usernames=["techguru", "@jazz_cat"])
    assert out["mentions"] == ["nightowl", "techguru", "jazz_cat"]
    assert post_ok("mention", s, {"tweet_id": 4, "mentioned_usernames": ["techguru"]}, out) == []
    assert "own tweets" in unchanged_on_error(s, "mention", tweet_id=0, mentioned_usernames=["nightowl"])
    assert "not found" in unchanged_on_error(s, "mention", tweet_id=4, mentioned_usernames=["ghost"])
    assert "no users" in unchanged_on_error(s, "mention", tweet_id=4, mentioned_usernames=[])


def test_follow_unfollow_list():
    s = posting_in("techguru")
    assert call(s, "list_all_following") == {"following_list": ["data_dan", "pixel_art"]}
    assert call(s, "follow_user", username_to_follow="jazz_cat") == {"follow_status": True, "username": "jazz_cat"}
    assert post_ok("follow_user", s, {"username_to_follow": "jazz_cat"}, {}) == []
    assert "already following" in unchanged_on_error(s, "follow_user", username_to_follow="jazz_cat")
    assert "yourself" in unchanged_on_error(s, "follow_user", username_to_follow="techguru")
    assert "not found" in unchanged_on_error(s, "follow_user", username_to_follow="ghost")
    assert call(s, "unfollow_user", username_to_unfollow="data_dan")["unfollow_status"] is True
    assert post_ok("unfollow_user", s, {"username_to_unfollow": "data_dan"}, {}) == []
    assert "not following" in unchanged_on_error(s, "unfollow_user", username_to_unfollow="data_dan")
    assert call(s, "list_all_following") == {"following_list": ["pixel_art", "jazz_cat"]}
    assert "not logged in" in unchanged_on_error(fresh(), "list_all_following")


def test_public_reads():
    s = fresh()
    t = call(s, "get_tweet", tweet_id=3)
    assert t["username"] == "chef_maria" and t["tags"] == ["#recipe", "#food"]
    assert "not found" in unchanged_on_error(s, "get_tweet", tweet_id=123)
    tw = call(s, "get_user_tweets", username="techguru")["tweets"]
    assert [x["id"] for x in tw] == [9, 0]  # newest first
    assert "not found" in unchanged_on_error(s, "get_user_tweets", username="ghost")
    hits = call(s, "search_tweets", keyword="CODING")["tweets"]
    assert [x["id"] for x in hits] == [9, 1]  # content or tag, case-insensitive, newest first
    assert "empty" in unchanged_on_error(s, "search_tweets", keyword=" ")
    assert call(s, "get_tweet_comments", tweet_id=0) == {"tweet_id": 0, "comments": []}
    stats = call(s, "posting_get_user_stats", username="techguru")
    assert stats == {
        "username": "techguru",
        "tweet_count": 2,
        "retweet_count": 0,
        "following_count": 2,
        "followers_count": 2,
    }
    assert "not found" in unchanged_on_error(s, "posting_get_user_stats", username="ghost")


# ----------------------------------------------------------------- messaging
def test_message_login_and_status():
    s = fresh()
    assert call(s, "message_get_login_status") == {"login_status": False}
    before = DOM.snapshot(s)
    out = call(s, "message_login", user_id="USR999")
    assert out["login_status"] is False and DOM.snapshot(s) == before
    assert post_ok("message_login", s, {}, out) == []
    out = call(s, "message_login", user_id="USR003")
    assert out["login_status"] is True and out["user_id"] == "USR003"
    assert post_ok("message_login", s, {}, out) == []
    assert call(s, "message_get_login_status") == {"login_status": True, "user_id": "USR003"}


def test_get_user_id():
    s = fresh()
    out = call(s, "get_user_id", user="Grace")
    assert out == {"user": "Grace", "user_id": "USR007"}
    assert post_ok("get_user_id", s, {"user": "Grace"}, out) == []
    assert "not found" in unchanged_on_error(s, "get_user_id", user="Zed")


def test_send_view_delete_messages():
    s = messaging_in("USR001")
    out = call(s, "send_message", receiver_id="USR002", message="hi Bob")
    assert out["sent_status"] is True and out["message_id"] == 5
    assert post_ok("send_message", s, {"receiver_id": "USR002", "message": "hi Bob"}, out) == []
    assert call(s, "view_messages_sent") == {
        "messages": {
            "USR002": ["Are we still on for lunch on Friday?", "hi Bob"],
            "USR004": ["Can you send me the slides from the workshop?"],
        }
    }
    assert "not found" in unchanged_on_error(s, "send_message", receiver_id="USR404", message="x")
    assert "yourself" in unchanged_on_error(s, "send_message", receiver_id="USR001", message="x")
    assert "empty" in unchanged_on_error(s, "send_message", receiver_id="USR002", message=" ")

    out = call(s, "delete_message", receiver_id="USR002")  # the latest one only
    assert out == {"deleted_status": True, "message_id": 5, "receiver_id": "USR002"}
    assert post_ok("delete_message", s, {"receiver_id": "USR002"}, out) == []
    assert [m.id for m in s.messaging.messages] == [0, 1, 2, 3, 4]
    assert "no message" in unchanged_on_error(s, "delete_message", receiver_id="USR009")
    assert "not logged in" in unchanged_on_error(fresh(), "send_message", receiver_id="USR002", message="x")
    assert "not logged in" in unchanged_on_error(fresh(), "view_messages_sent")


def test_message_counter_follows_loaded_messages():
    s = messaging_in("USR001", messages=[{"id": 7, "sender_id": "USR002", "receiver_id": "USR001", "message": "a"}])
    assert call(s, "send_message", receiver_id="USR002", message="b")["message_id"] == 8


def test_contacts_search_stats():
    s = messaging_in("USR001")
    out = call(s, "add_contact", user_name="Eve")
    assert out == {"added_status": True, "user_name": "Eve", "user_id": "USR005"}
    assert post_ok("add_contact", s, {"user_name": "Eve"}, out) == []
    assert s.messaging.contacts["USR001"] == ["Bob", "Daniel", "Eve"]
    assert "already a contact" in unchanged_on_error(s, "add_contact", user_name="Eve")
    assert "yourself" in unchanged_on_error(s, "add_contact", user_name="Alice")
    assert "not found" in unchanged_on_error(s, "add_contact", user_name="Zed")

    hits = call(s, "search_messages", keyword="REPORT")["messages"]
    assert [m["id"] for m in hits] == [2]  # received by USR001
    assert call(s, "search_messages", keyword="birthday")["messages"] == []  # between other users
    assert "empty" in unchanged_on_error(s, "search_messages", keyword="")
    assert call(s, "get_message_stats") == {
        "user_id": "USR001",
        "sent_count": 2,
        "received_count": 2,
        "contacts_count": 3,
    }
    assert "not logged in" in unchanged_on_error(fresh(), "get_message_stats")


# ------------------------------------------------------------ postconditions
def test_postconditions_catch_inconsistent_results():
    s = posting_in("techguru")
    assert post_ok("post_tweet", s, {"content": "x"}, {"id": 77})  # no such tweet stored
    assert post_ok("posting_login", s, {}, {"authentication_status": False})  # session is open
    assert post_ok("follow_user", s, {"username_to_follow": "jazz_cat"}, {})
    m = messaging_in("USR001")
    assert post_ok("send_message", m, {"receiver_id": "USR002", "message": "x"}, {"message_id": 0})
    assert post_ok("delete_message", m, {"receiver_id": "USR002"}, {"message_id": 0})
    assert post_ok("get_user_id", m, {"user": "Bob"}, {"user_id": "USR003"})


# ------------------------------------------------------------------- state
def test_snapshot_deterministic_and_validated():
    a, b = DOM.snapshot(fresh()), DOM.snapshot(fresh())
    assert a == b and json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["posting"]["next_tweet_id"] == 10 and a["messaging"]["next_message_id"] == 5
    assert DOM.load_state(a).model_dump(mode="json") == a  # round trip
    s1, s2 = posting_in(), posting_in()
    for s in (s1, s2):
        call(s, "post_tweet", content="same")
        call(s, "follow_user", username_to_follow="nightowl")
    assert DOM.snapshot(s1) == DOM.snapshot(s2)
    with pytest.raises(ValueError):
        fresh({"posting": {"authenticated": True, "username": "ghost"}})
    with pytest.raises(ValueError):
        fresh({"messaging": {"logged_in": True, "current_user": "USR404"}})
    with pytest.raises(ValueError):
        fresh({"posting": {"unknown_field": 1}})


def test_environment_stage_leaves_world_unchanged_on_error():
    env = Environment(["social"], {"social": {"posting": {"authenticated": True, "username": "techguru"}}})
    before = env.snapshot()
    result, staged = env.stage("follow_user", {"username_to_follow": "ghost"})
    assert "error" in result and env.snapshot() == before
    result, staged = env.stage("follow_user", {"username_to_follow": "nightowl"})
    assert env.snapshot() == before  # staged on a copy until committed
    env.commit("follow_user", staged)
    assert env.snapshot()["social"]["posting"]["following"]["techguru"][-1] == "nightowl"


# ---------------------------------------------------------------- slot values
def test_slot_values_valid_in_domain_data():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "data_gen"
    vals = json.loads((root / "slot_values" / "social.json").read_text())
    s = fresh()
    assert set(vals["posting_user"]) <= set(s.posting.users)
    assert set(vals["contact_name"]) <= set(s.messaging.user_map)
    assert set(vals["user_id"]) <= set(s.messaging.user_map.values())
    assert all(h.startswith("#") for h in vals["hashtag"])
    assert all(0 < len(t) <= 280 for t in vals["tweet_text"])
    for k, v in vals.items():
        assert len(v) >= 8 and len(set(v)) == len(v), k
    # every slot type a social solution uses has alternatives in its domains' value lists
    fs = json.loads((root / "slot_values" / "file_system.json").read_text())
    for f in sorted((root / "solutions" / "social").glob("*.json")):
        sol = json.loads(f.read_text())
        pool = dict(vals, **(fs if "file_system" in sol["domains"] else {}))
        for name, slot in sol.get("slots", {}).items():
            assert len(pool.get(slot["type"], [])) >= 8, f"{f.name}: slot {name} of type {slot['type']}"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("social", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
