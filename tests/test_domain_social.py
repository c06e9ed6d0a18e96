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
    for name, tool in DOM.tools.items():
        assert tool.spec.domain == "social" and tool.spec.description, name
        for param in tool.spec.required:
            assert tool.spec.param_schema(param).get("description"), f"{name}.{param} has no description"


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
    for name, tool in DOM.tools.items():
        keys = [p.key for p in tool.spec.prerequisites]
        if name in posting_auth:
            assert keys == ["posting_authenticated"], name
        elif name in message_auth:
            assert keys == ["message_authenticated"], name
        else:
            assert keys == [], name
        assert all(p.sat.op == "truthy" for p in tool.spec.prerequisites)
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
    def written(tool, args, result):
        return toolgate.declared_writes(DOM.tools[tool].spec, args, result)

    state = fresh({"posting": {"passwords": {"techguru": "pw"}}})
    out = call(state, "posting_login", username="techguru", password="pw")
    assert written(
        "posting_login", {"username": "techguru", "password": "pw"}, out
    ) == {  # the password is secret: not in S
        "username": "techguru",
        "posting_authenticated": True,
        "posting_user": "techguru",
    }
    bad = call(fresh(), "posting_login", username="techguru", password="nope")
    assert written("posting_login", {"username": "techguru", "password": "nope"}, bad) == {
        "username": "techguru",
        "posting_authenticated": False,
    }
    assert written("posting_logout", {}, {"logout_status": True}) == {"posting_authenticated": False}
    assert written("get_user_id", {"user": "Bob"}, call(fresh(), "get_user_id", user="Bob")) == {
        "user": "Bob",
        "user_id:Bob": "USR002",
    }
    out = call(fresh(), "get_user_tweets", username="techguru")
    assert written("get_user_tweets", {"username": "techguru"}, out)["latest_tweet:techguru"] == 9
    out = call(fresh(), "search_tweets", keyword="nothing-matches-this")
    assert "tweet_match:nothing-matches-this" not in written("search_tweets", {"keyword": "nothing-matches-this"}, out)
    out = call(fresh(), "get_tweet", tweet_id=3)
    assert written("get_tweet", {"tweet_id": 3}, out)["tweet_author"] == "chef_maria"
    out = call(messaging_in(), "search_messages", keyword="lunch")
    assert (
        written("search_messages", {"keyword": "lunch"}, out)["message_match:lunch"]
        == "Are we still on for lunch on Friday?"
    )
    out = call(messaging_in(), "add_contact", user_name="Eve")
    assert written("add_contact", {"user_name": "Eve"}, out)["user_id:Eve"] == "USR005"


def test_precondition_gates_on_scratchpad():
    spec = DOM.tools["post_tweet"].spec
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad({"posting_authenticated": True})) == []
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad({"posting_authenticated": False}))
    assert toolgate.precondition(spec, {"content": "hi"}, Scratchpad())
    assert toolgate.precondition(spec, {"content": 5}, Scratchpad({"posting_authenticated": True}))


# ------------------------------------------------------------------- posting
def test_posting_login_status_logout():
    state = fresh({"posting": {"passwords": {"nightowl": "pw1"}}})
    assert call(state, "posting_get_login_status") == {"login_status": False}
    before = DOM.snapshot(state)
    assert call(state, "posting_login", username="nightowl", password="wrong") == {"authentication_status": False}
    assert call(state, "posting_login", username="ghost", password="pw1") == {"authentication_status": False}
    assert DOM.snapshot(state) == before
    out = call(state, "posting_login", username="nightowl", password="pw1")
    assert out == {"authentication_status": True, "username": "nightowl"}
    assert post_ok("posting_login", state, {}, out) == []
    assert call(state, "posting_get_login_status") == {"login_status": True, "username": "nightowl"}
    assert call(state, "posting_logout") == {"logout_status": True, "username": "nightowl"}
    assert state.posting.authenticated is False and state.posting.username is None
    assert "not logged in" in unchanged_on_error(state, "posting_logout")


def test_post_tweet_and_errors():
    state = posting_in("techguru")
    out = call(state, "post_tweet", content="hello", tags=["#x"], mentions=["@data_dan"])
    assert out == {"id": 10, "username": "techguru", "content": "hello", "tags": ["#x"], "mentions": ["data_dan"]}
    assert post_ok("post_tweet", state, {"content": "hello"}, out) == []
    assert call(state, "post_tweet", content="again")["id"] == 11
    assert "empty" in unchanged_on_error(state, "post_tweet", content="   ")
    assert "limit" in unchanged_on_error(state, "post_tweet", content="x" * 281)
    assert "not found" in unchanged_on_error(state, "post_tweet", content="hi", mentions=["ghost"])
    assert "not logged in" in unchanged_on_error(fresh(), "post_tweet", content="hi")


def test_tweet_counter_follows_loaded_tweets():
    state = posting_in("techguru", tweets=[{"id": 41, "username": "nightowl", "content": "a"}])
    assert state.posting.next_tweet_id == 42
    assert call(state, "post_tweet", content="b")["id"] == 42


def test_retweet_comment_mention():
    state = posting_in("bookworm")
    assert call(state, "retweet", tweet_id=2)["retweet_status"] == "Successfully retweeted"
    assert state.posting.retweets == {"bookworm": [2]}
    assert post_ok("retweet", state, {"tweet_id": 2}, {}) == []
    assert "already retweeted" in unchanged_on_error(state, "retweet", tweet_id=2)
    assert "not found" in unchanged_on_error(state, "retweet", tweet_id=99)

    assert call(state, "comment", tweet_id=2, comment_content="nice")["comment_status"] == "Comment added successfully"
    assert call(state, "get_tweet_comments", tweet_id=2) == {
        "tweet_id": 2,
        "comments": [{"username": "bookworm", "content": "nice"}],
    }
    assert post_ok("comment", state, {"tweet_id": 2, "comment_content": "nice"}, {}) == []
    assert "empty" in unchanged_on_error(state, "comment", tweet_id=2, comment_content=" ")
    assert "not found" in unchanged_on_error(state, "comment", tweet_id=50, comment_content="x")

    out = call(state, "mention", tweet_id=4, mentioned_usernames=["techguru", "@jazz_cat"])
    assert out["mentions"] == ["nightowl", "techguru", "jazz_cat"]
    assert post_ok("mention", state, {"tweet_id": 4, "mentioned_usernames": ["techguru"]}, out) == []
    assert "own tweets" in unchanged_on_error(state, "mention", tweet_id=0, mentioned_usernames=["nightowl"])
    assert "not found" in unchanged_on_error(state, "mention", tweet_id=4, mentioned_usernames=["ghost"])
    assert "no users" in unchanged_on_error(state, "mention", tweet_id=4, mentioned_usernames=[])


def test_follow_unfollow_list():
    state = posting_in("techguru")
    assert call(state, "list_all_following") == {"following_list": ["data_dan", "pixel_art"]}
    assert call(state, "follow_user", username_to_follow="jazz_cat") == {"follow_status": True, "username": "jazz_cat"}
    assert post_ok("follow_user", state, {"username_to_follow": "jazz_cat"}, {}) == []
    assert "already following" in unchanged_on_error(state, "follow_user", username_to_follow="jazz_cat")
    assert "yourself" in unchanged_on_error(state, "follow_user", username_to_follow="techguru")
    assert "not found" in unchanged_on_error(state, "follow_user", username_to_follow="ghost")
    assert call(state, "unfollow_user", username_to_unfollow="data_dan")["unfollow_status"] is True
    assert post_ok("unfollow_user", state, {"username_to_unfollow": "data_dan"}, {}) == []
    assert "not following" in unchanged_on_error(state, "unfollow_user", username_to_unfollow="data_dan")
    assert call(state, "list_all_following") == {"following_list": ["pixel_art", "jazz_cat"]}
    assert "not logged in" in unchanged_on_error(fresh(), "list_all_following")


def test_public_reads():
    state = fresh()
    tweet = call(state, "get_tweet", tweet_id=3)
    assert tweet["username"] == "chef_maria" and tweet["tags"] == ["#recipe", "#food"]
    assert "not found" in unchanged_on_error(state, "get_tweet", tweet_id=123)
    tw = call(state, "get_user_tweets", username="techguru")["tweets"]
    assert [x["id"] for x in tw] == [9, 0]  # newest first
    assert "not found" in unchanged_on_error(state, "get_user_tweets", username="ghost")
    hits = call(state, "search_tweets", keyword="CODING")["tweets"]
    assert [x["id"] for x in hits] == [9, 1]  # content or tag, case-insensitive, newest first
    assert "empty" in unchanged_on_error(state, "search_tweets", keyword=" ")
    assert call(state, "get_tweet_comments", tweet_id=0) == {"tweet_id": 0, "comments": []}
    stats = call(state, "posting_get_user_stats", username="techguru")
    assert stats == {
        "username": "techguru",
        "tweet_count": 2,
        "retweet_count": 0,
        "following_count": 2,
        "followers_count": 2,
    }
    assert "not found" in unchanged_on_error(state, "posting_get_user_stats", username="ghost")


# ----------------------------------------------------------------- messaging
def test_message_login_and_status():
    state = fresh()
    assert call(state, "message_get_login_status") == {"login_status": False}
    before = DOM.snapshot(state)
    out = call(state, "message_login", user_id="USR999")
    assert out["login_status"] is False and DOM.snapshot(state) == before
    assert post_ok("message_login", state, {}, out) == []
    out = call(state, "message_login", user_id="USR003")
    assert out["login_status"] is True and out["user_id"] == "USR003"
    assert post_ok("message_login", state, {}, out) == []
    assert call(state, "message_get_login_status") == {"login_status": True, "user_id": "USR003"}


def test_get_user_id():
    state = fresh()
    out = call(state, "get_user_id", user="Grace")
    assert out == {"user": "Grace", "user_id": "USR007"}
    assert post_ok("get_user_id", state, {"user": "Grace"}, out) == []
    assert "not found" in unchanged_on_error(state, "get_user_id", user="Zed")


def test_send_view_delete_messages():
    state = messaging_in("USR001")
    out = call(state, "send_message", receiver_id="USR002", message="hi Bob")
    assert out["sent_status"] is True and out["message_id"] == 5
    assert post_ok("send_message", state, {"receiver_id": "USR002", "message": "hi Bob"}, out) == []
    assert call(state, "view_messages_sent") == {
        "messages": {
            "USR002": ["Are we still on for lunch on Friday?", "hi Bob"],
            "USR004": ["Can you send me the slides from the workshop?"],
        }
    }
    assert "not found" in unchanged_on_error(state, "send_message", receiver_id="USR404", message="x")
    assert "yourself" in unchanged_on_error(state, "send_message", receiver_id="USR001", message="x")
    assert "empty" in unchanged_on_error(state, "send_message", receiver_id="USR002", message=" ")

    out = call(state, "delete_message", receiver_id="USR002")  # the latest one only
    assert out == {"deleted_status": True, "message_id": 5, "receiver_id": "USR002"}
    assert post_ok("delete_message", state, {"receiver_id": "USR002"}, out) == []
    assert [m.id for m in state.messaging.messages] == [0, 1, 2, 3, 4]
    assert "no message" in unchanged_on_error(state, "delete_message", receiver_id="USR009")
    assert "not logged in" in unchanged_on_error(fresh(), "send_message", receiver_id="USR002", message="x")
    assert "not logged in" in unchanged_on_error(fresh(), "view_messages_sent")


def test_message_counter_follows_loaded_messages():
    state = messaging_in("USR001", messages=[{"id": 7, "sender_id": "USR002", "receiver_id": "USR001", "message": "a"}])
    assert call(state, "send_message", receiver_id="USR002", message="b")["message_id"] == 8


def test_contacts_search_stats():
    state = messaging_in("USR001")
    out = call(state, "add_contact", user_name="Eve")
    assert out == {"added_status": True, "user_name": "Eve", "user_id": "USR005"}
    assert post_ok("add_contact", state, {"user_name": "Eve"}, out) == []
    assert state.messaging.contacts["USR001"] == ["Bob", "Daniel", "Eve"]
    assert "already a contact" in unchanged_on_error(state, "add_contact", user_name="Eve")
    assert "yourself" in unchanged_on_error(state, "add_contact", user_name="Alice")
    assert "not found" in unchanged_on_error(state, "add_contact", user_name="Zed")

    hits = call(state, "search_messages", keyword="REPORT")["messages"]
    assert [m["id"] for m in hits] == [2]  # received by USR001
    assert call(state, "search_messages", keyword="birthday")["messages"] == []  # between other users
    assert "empty" in unchanged_on_error(state, "search_messages", keyword="")
    assert call(state, "get_message_stats") == {
        "user_id": "USR001",
        "sent_count": 2,
        "received_count": 2,
        "contacts_count": 3,
    }
    assert "not logged in" in unchanged_on_error(fresh(), "get_message_stats")


# ------------------------------------------------------------ postconditions
def test_postconditions_catch_inconsistent_results():
    state = posting_in("techguru")
    assert post_ok("post_tweet", state, {"content": "x"}, {"id": 77})  # no such tweet stored
    assert post_ok("posting_login", state, {}, {"authentication_status": False})  # session is open
    assert post_ok("follow_user", state, {"username_to_follow": "jazz_cat"}, {})
    messaging = messaging_in("USR001")
    assert post_ok("send_message", messaging, {"receiver_id": "USR002", "message": "x"}, {"message_id": 0})
    assert post_ok("delete_message", messaging, {"receiver_id": "USR002"}, {"message_id": 0})
    assert post_ok("get_user_id", messaging, {"user": "Bob"}, {"user_id": "USR003"})


# ------------------------------------------------------------------- state
def test_snapshot_deterministic_and_validated():
    first, second = DOM.snapshot(fresh()), DOM.snapshot(fresh())
    assert first == second and json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["posting"]["next_tweet_id"] == 10 and first["messaging"]["next_message_id"] == 5
    assert DOM.load_state(first).model_dump(mode="json") == first  # round trip
    s1, s2 = posting_in(), posting_in()
    for state in (s1, s2):
        call(state, "post_tweet", content="same")
        call(state, "follow_user", username_to_follow="nightowl")
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
    state = fresh()
    assert set(vals["posting_user"]) <= set(state.posting.users)
    assert set(vals["contact_name"]) <= set(state.messaging.user_map)
    assert set(vals["user_id"]) <= set(state.messaging.user_map.values())
    assert all(h.startswith("#") for h in vals["hashtag"])
    assert all(0 < len(t) <= 280 for t in vals["tweet_text"])
    for k, values in vals.items():
        assert len(values) >= 8 and len(set(values)) == len(values), k
    # every slot type a social solution uses has alternatives in its domains' value lists
    fs = json.loads((root / "slot_values" / "file_system.json").read_text())
    for path in sorted((root / "solutions" / "social").glob("*.json")):
        sol = json.loads(path.read_text())
        pool = dict(vals, **(fs if "file_system" in sol["domains"] else {}))
        for name, slot in sol.get("slots", {}).items():
            assert len(pool.get(slot["type"], [])) >= 8, f"{path.name}: slot {name} of type {slot['type']}"


# ------------------------------------------------------------------ worked solutions
@pytest.mark.parametrize("path", solution_paths("social", at_least=42), ids=lambda p: p.stem)
def test_worked_solution_verifies(path):
    assert_solution_verifies(path)
