"""Social tools: a posting service (BFCL TwitterAPI style) and a messaging service (BFCL MessageAPI style).

Each service has its own session. Tools that act for the logged-in account
declare a ToolGate prerequisite on the session fact the login tools write to
the scratchpad (``posting_authenticated`` / ``message_authenticated``); the
tools also check the session in the world themselves, so a stale scratchpad
cannot make them act for nobody. Public look-ups (a tweet, a user's tweets,
a name's user id) need no session. All validation happens before any
mutation, so a failing call leaves the state unchanged.
"""

from __future__ import annotations

from typing import Any

from ...registry.model import Prerequisite, Sat
from ..base import Domain, ToolError, find
from .state import Comment, Message, MessagingState, PostingState, SocialState, Tweet

DOMAIN = Domain(
    "social",
    SocialState,
    "A social network: post, retweet, comment and follow on the posting service; send, search and delete "
    "direct messages on the messaging service. Each service has its own login.",
)
tool = DOMAIN.tool

MAX_TWEET_LEN = 280

POSTING_AUTH = Prerequisite(
    key="posting_authenticated",
    sat=Sat(op="truthy"),
    description="logged in to the posting service (posting_login or posting_get_login_status sets it)",
)
MESSAGE_AUTH = Prerequisite(
    key="message_authenticated",
    sat=Sat(op="truthy"),
    description="logged in to the messaging service (message_login or message_get_login_status sets it)",
)


# ----------------------------------------------------------------- helpers
def _posting_user(state: SocialState) -> str:
    posting = state.posting
    if not posting.authenticated or posting.username is None:
        raise ToolError("not logged in to the posting service; call posting_login first")
    return posting.username


def _tweet(posting: PostingState, tweet_id: int) -> Tweet:
    for tweet in posting.tweets:
        if tweet.id == tweet_id:
            return tweet
    raise ToolError(f"tweet {tweet_id} not found")


def _registered(posting: PostingState, username: str, what: str = "user") -> str:
    if username not in posting.users:
        raise ToolError(f"{what} {username!r} not found")
    return username


def _tweet_view(tweet: Tweet) -> dict[str, Any]:
    return {
        "id": tweet.id,
        "username": tweet.username,
        "content": tweet.content,
        "tags": list(tweet.tags),
        "mentions": list(tweet.mentions),
    }


def _newest_first(tweets: list[Tweet]) -> list[dict[str, Any]]:
    return [_tweet_view(t) for t in sorted(tweets, key=lambda t: -t.id)]


def _message_user(state: SocialState) -> str:
    messaging = state.messaging
    if not messaging.logged_in or messaging.current_user is None:
        raise ToolError("not logged in to the messaging service; call message_login first")
    return messaging.current_user


def _known_id(messaging: MessagingState, user_id: str) -> str:
    if user_id not in messaging.user_map.values():
        raise ToolError(f"user id {user_id!r} not found")
    return user_id


def _name_of(messaging: MessagingState, user_id: str) -> str | None:
    return next((n for n, i in messaging.user_map.items() if i == user_id), None)


# ----------------------------------------------------------- postconditions
def _posting_session_matches(args: dict, result: dict, state: SocialState) -> str | None:
    posting = state.posting
    ok = result.get("authentication_status", result.get("login_status"))
    if bool(ok) != posting.authenticated:
        return f"reported login status {ok} but the posting session is {'open' if posting.authenticated else 'closed'}"
    if ok and result.get("username") != posting.username:
        return f"reported user {result.get('username')!r} but the session belongs to {posting.username!r}"
    return None


def _tweet_stored(args: dict, result: dict, state: SocialState) -> str | None:
    posting = state.posting
    tweet = next((x for x in posting.tweets if x.id == result.get("id")), None)
    if tweet is None:
        return f"tweet {result.get('id')} is not stored"
    if tweet.content != args["content"] or tweet.username != posting.username:
        return "the stored tweet does not carry the requested content and author"
    return None


def _retweet_stored(args: dict, result: dict, state: SocialState) -> str | None:
    posting = state.posting
    if args["tweet_id"] not in posting.retweets.get(posting.username or "", []):
        return f"tweet {args['tweet_id']} is not among the user's retweets"
    return None


def _comment_stored(args: dict, result: dict, state: SocialState) -> str | None:
    tweet = next((x for x in state.posting.tweets if x.id == args["tweet_id"]), None)
    if tweet is None or not tweet.comments or tweet.comments[-1].content != args["comment_content"]:
        return "the comment is not the latest comment of the tweet"
    return None


def _mentions_stored(args: dict, result: dict, state: SocialState) -> str | None:
    tweet = next((x for x in state.posting.tweets if x.id == args["tweet_id"]), None)
    if tweet is None or not all(u.lstrip("@") in tweet.mentions for u in args["mentioned_usernames"]):
        return "the tweet does not mention every requested user"
    return None


def _now_following(args: dict, result: dict, state: SocialState) -> str | None:
    posting = state.posting
    if args["username_to_follow"] not in posting.following.get(posting.username or "", []):
        return f"{args['username_to_follow']!r} is not in the following list"
    return None


def _not_following(args: dict, result: dict, state: SocialState) -> str | None:
    posting = state.posting
    if args["username_to_unfollow"] in posting.following.get(posting.username or "", []):
        return f"{args['username_to_unfollow']!r} is still in the following list"
    return None


def _message_session_matches(args: dict, result: dict, state: SocialState) -> str | None:
    messaging = state.messaging
    if bool(result.get("login_status")) != messaging.logged_in:
        return f"reported login status {result.get('login_status')} but the messaging session is {'open' if messaging.logged_in else 'closed'}"
    if result.get("login_status") and result.get("user_id") != messaging.current_user:
        return f"reported user {result.get('user_id')!r} but the session belongs to {messaging.current_user!r}"
    return None


def _id_matches_map(args: dict, result: dict, state: SocialState) -> str | None:
    if state.messaging.user_map.get(args["user"]) != result.get("user_id"):
        return f"user id {result.get('user_id')!r} is not the id of {args['user']!r}"
    return None


def _message_stored(args: dict, result: dict, state: SocialState) -> str | None:
    message = next((x for x in state.messaging.messages if x.id == result.get("message_id")), None)
    if message is None or message.receiver_id != args["receiver_id"] or message.message != args["message"]:
        return f"message {result.get('message_id')} to {args['receiver_id']!r} is not stored as sent"
    return None


def _message_gone(args: dict, result: dict, state: SocialState) -> str | None:
    if any(x.id == result.get("message_id") for x in state.messaging.messages):
        return f"message {result.get('message_id')} still exists"
    return None


def _contact_stored(args: dict, result: dict, state: SocialState) -> str | None:
    messaging = state.messaging
    if args["user_name"] not in messaging.contacts.get(messaging.current_user or "", []):
        return f"{args['user_name']!r} is not in the contact list"
    return None


# ================================================================= posting
@tool(
    side_effect=True,
    writes={"posting_authenticated": "result.authentication_status", "posting_user": "result.username"},
    post=[_posting_session_matches],
    secret=("password",),
)
def posting_login(state: SocialState, username: str, password: str) -> dict:
    """Log in to the posting service; returns authentication_status false for unknown users or a wrong password.

    Args:
        username: Handle of the account to log in as.
        password: Password of the account.
    """
    posting = state.posting
    if username not in posting.users or posting.passwords.get(username) != password:
        return {"authentication_status": False}
    posting.authenticated = True
    posting.username = username
    return {"authentication_status": True, "username": username}


@tool(
    writes={"posting_authenticated": "result.login_status", "posting_user": "result.username"},
    post=[_posting_session_matches],
)
def posting_get_login_status(state: SocialState) -> dict:
    """Report whether a user is logged in to the posting service, and who."""
    posting = state.posting
    if posting.authenticated:
        return {"login_status": True, "username": posting.username}
    return {"login_status": False}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], writes={"posting_authenticated": "const:false"})
def posting_logout(state: SocialState) -> dict:
    """Log out of the posting service."""
    user = _posting_user(state)
    state.posting.authenticated = False
    state.posting.username = None
    return {"logout_status": True, "username": user}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], writes={"tweet_id": "result.id"}, post=[_tweet_stored])
def post_tweet(
    state: SocialState, content: str, tags: list[str] | None = None, mentions: list[str] | None = None
) -> dict:
    """Post a tweet as the logged-in user.

    Args:
        content: Text of the tweet (at most 280 characters).
        tags: Hashtags to attach, e.g. ['#news'].
        mentions: Handles of registered users to mention.
    """
    user = _posting_user(state)
    posting = state.posting
    if not content.strip():
        raise ToolError("tweet content is empty")
    if len(content) > MAX_TWEET_LEN:
        raise ToolError(f"tweet is {len(content)} characters long; the limit is {MAX_TWEET_LEN}")
    ments = [_registered(posting, u.lstrip("@"), "mentioned user") for u in (mentions or [])]
    tweet = Tweet(id=posting.next_tweet_id, username=user, content=content, tags=list(tags or []), mentions=ments)
    posting.tweets.append(tweet)
    posting.next_tweet_id += 1
    return _tweet_view(tweet)


@tool(side_effect=True, prerequisites=[POSTING_AUTH], post=[_retweet_stored])
def retweet(state: SocialState, tweet_id: int) -> dict:
    """Retweet a tweet as the logged-in user.

    Args:
        tweet_id: Id of the tweet to retweet.
    """
    user = _posting_user(state)
    posting = state.posting
    _tweet(posting, tweet_id)
    mine = posting.retweets.get(user, [])
    if tweet_id in mine:
        raise ToolError(f"tweet {tweet_id} was already retweeted")
    posting.retweets[user] = mine + [tweet_id]
    return {"retweet_status": "Successfully retweeted", "tweet_id": tweet_id}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], post=[_comment_stored])
def comment(state: SocialState, tweet_id: int, comment_content: str) -> dict:
    """Comment on a tweet as the logged-in user.

    Args:
        tweet_id: Id of the tweet to comment on.
        comment_content: Text of the comment.
    """
    user = _posting_user(state)
    tweet = _tweet(state.posting, tweet_id)
    if not comment_content.strip():
        raise ToolError("comment is empty")
    tweet.comments.append(Comment(username=user, content=comment_content))
    return {"comment_status": "Comment added successfully", "tweet_id": tweet_id}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], post=[_mentions_stored])
def mention(state: SocialState, tweet_id: int, mentioned_usernames: list[str]) -> dict:
    """Mention users in one of the logged-in user's tweets.

    Args:
        tweet_id: Id of a tweet the logged-in user posted.
        mentioned_usernames: Handles of the users to mention.
    """
    user = _posting_user(state)
    posting = state.posting
    tweet = _tweet(posting, tweet_id)
    if tweet.username != user:
        raise ToolError(
            f"tweet {tweet_id} belongs to {tweet.username!r}; you can only mention users in your own tweets"
        )
    if not mentioned_usernames:
        raise ToolError("no users to mention")
    names = [_registered(posting, u.lstrip("@"), "mentioned user") for u in mentioned_usernames]
    for n in names:
        if n not in tweet.mentions:
            tweet.mentions.append(n)
    return {"mention_status": "Users mentioned successfully", "tweet_id": tweet_id, "mentions": list(tweet.mentions)}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], post=[_now_following])
def follow_user(state: SocialState, username_to_follow: str) -> dict:
    """Follow another user as the logged-in user.

    Args:
        username_to_follow: Handle of the user to follow.
    """
    user = _posting_user(state)
    posting = state.posting
    _registered(posting, username_to_follow)
    if username_to_follow == user:
        raise ToolError("you cannot follow yourself")
    cur = posting.following.get(user, [])
    if username_to_follow in cur:
        raise ToolError(f"already following {username_to_follow!r}")
    posting.following[user] = cur + [username_to_follow]
    return {"follow_status": True, "username": username_to_follow}


@tool(side_effect=True, prerequisites=[POSTING_AUTH], post=[_not_following])
def unfollow_user(state: SocialState, username_to_unfollow: str) -> dict:
    """Stop following a user as the logged-in user.

    Args:
        username_to_unfollow: Handle of the user to unfollow.
    """
    user = _posting_user(state)
    posting = state.posting
    cur = posting.following.get(user, [])
    if username_to_unfollow not in cur:
        raise ToolError(f"not following {username_to_unfollow!r}")
    posting.following[user] = [u for u in cur if u != username_to_unfollow]
    return {"unfollow_status": True, "username": username_to_unfollow}


@tool(prerequisites=[POSTING_AUTH], writes={"following": "result.following_list"})
def list_all_following(state: SocialState) -> dict:
    """List the handles the logged-in user follows."""
    user = _posting_user(state)
    return {"following_list": list(state.posting.following.get(user, []))}


@tool(writes={"tweet_author": "result.username", "tweet_content": "result.content"})
def get_tweet(state: SocialState, tweet_id: int) -> dict:
    """Retrieve one tweet by id (public, no login needed).

    Args:
        tweet_id: Id of the tweet.
    """
    return _tweet_view(_tweet(state.posting, tweet_id))


@tool(writes={"latest_tweet:{params.username}": "result.tweets.0.id"})
def get_user_tweets(state: SocialState, username: str) -> dict:
    """Retrieve all tweets of a user, newest first (public, no login needed).

    Args:
        username: Handle of the user.
    """
    posting = state.posting
    _registered(posting, username)
    return {"username": username, "tweets": _newest_first([t for t in posting.tweets if t.username == username])}


@tool(writes={"tweet_match:{params.keyword}": "result.tweets.0.id"})
def search_tweets(state: SocialState, keyword: str) -> dict:
    """Search all tweets for a keyword in their text or tags (case-insensitive), newest first.

    Args:
        keyword: Word or phrase to look for.
    """
    k = keyword.lower().strip()
    if not k:
        raise ToolError("empty search keyword")
    hits = [t for t in state.posting.tweets if k in t.content.lower() or any(k in g.lower() for g in t.tags)]
    return {"keyword": keyword, "tweets": _newest_first(hits)}


@tool()
def get_tweet_comments(state: SocialState, tweet_id: int) -> dict:
    """Retrieve the comments on a tweet, oldest first (public, no login needed).

    Args:
        tweet_id: Id of the tweet.
    """
    tweet = _tweet(state.posting, tweet_id)
    return {"tweet_id": tweet_id, "comments": [c.model_dump() for c in tweet.comments]}


@tool()
def posting_get_user_stats(state: SocialState, username: str) -> dict:
    """Count a user's tweets, retweets, followed accounts and followers (public, no login needed).

    Args:
        username: Handle of the user.
    """
    posting = state.posting
    _registered(posting, username)
    return {
        "username": username,
        "tweet_count": sum(t.username == username for t in posting.tweets),
        "retweet_count": len(posting.retweets.get(username, [])),
        "following_count": len(posting.following.get(username, [])),
        "followers_count": sum(username in fl for fl in posting.following.values()),
    }


# =============================================================== messaging
@tool(
    side_effect=True,
    writes={"message_authenticated": "result.login_status", "message_user_id": "result.user_id"},
    post=[_message_session_matches],
)
def message_login(state: SocialState, user_id: str) -> dict:
    """Log in to the messaging service by user id; returns login_status false for an unknown id.

    Args:
        user_id: Id of the user to log in as, e.g. 'USR001'.
    """
    messaging = state.messaging
    if user_id not in messaging.user_map.values():
        return {"login_status": False, "message": f"user id {user_id!r} not found"}
    messaging.logged_in = True
    messaging.current_user = user_id
    return {"login_status": True, "user_id": user_id, "message": f"logged in as {_name_of(messaging, user_id)}"}


@tool(
    writes={"message_authenticated": "result.login_status", "message_user_id": "result.user_id"},
    post=[_message_session_matches],
)
def message_get_login_status(state: SocialState) -> dict:
    """Report whether a user is logged in to the messaging service, and which user id."""
    messaging = state.messaging
    if messaging.logged_in:
        return {"login_status": True, "user_id": messaging.current_user}
    return {"login_status": False}


@tool(writes={"user_id:{params.user}": "result.user_id"}, post=[_id_matches_map])
def get_user_id(state: SocialState, user: str) -> dict:
    """Look up the messaging user id of a user name (public, no login needed).

    Args:
        user: The user's name, e.g. 'Alice'.
    """
    uid = find(state.messaging.user_map, user, "user")
    return {"user": user, "user_id": uid}


@tool(
    side_effect=True, prerequisites=[MESSAGE_AUTH], writes={"message_id": "result.message_id"}, post=[_message_stored]
)
def send_message(state: SocialState, receiver_id: str, message: str) -> dict:
    """Send a direct message from the logged-in user to another user, by the receiver's user id.

    Args:
        receiver_id: User id of the receiver, e.g. 'USR002' (get_user_id resolves a name).
        message: Text of the message.
    """
    sender = _message_user(state)
    messaging = state.messaging
    _known_id(messaging, receiver_id)
    if receiver_id == sender:
        raise ToolError("you cannot send a message to yourself")
    if not message.strip():
        raise ToolError("message is empty")
    msg = Message(id=messaging.next_message_id, sender_id=sender, receiver_id=receiver_id, message=message)
    messaging.messages.append(msg)
    messaging.next_message_id += 1
    return {"sent_status": True, "message_id": msg.id, "message": f"Message sent to {receiver_id!r} successfully."}


@tool(prerequisites=[MESSAGE_AUTH])
def view_messages_sent(state: SocialState) -> dict:
    """List the messages the logged-in user has sent, grouped by receiver id, oldest first."""
    me = _message_user(state)
    out: dict[str, list[str]] = {}
    for message in state.messaging.messages:
        if message.sender_id == me:
            out.setdefault(message.receiver_id, []).append(message.message)
    return {"messages": out}


@tool(side_effect=True, prerequisites=[MESSAGE_AUTH], post=[_message_gone])
def delete_message(state: SocialState, receiver_id: str) -> dict:
    """Delete the latest message the logged-in user sent to a receiver.

    Args:
        receiver_id: User id of the receiver of the message to delete.
    """
    me = _message_user(state)
    messaging = state.messaging
    sent = [x for x in messaging.messages if x.sender_id == me and x.receiver_id == receiver_id]
    if not sent:
        raise ToolError(f"no message sent to {receiver_id!r} to delete")
    last = max(sent, key=lambda x: x.id)
    messaging.messages = [x for x in messaging.messages if x.id != last.id]
    return {"deleted_status": True, "message_id": last.id, "receiver_id": receiver_id}


@tool(
    side_effect=True,
    prerequisites=[MESSAGE_AUTH],
    writes={"user_id:{params.user_name}": "result.user_id"},
    post=[_contact_stored],
)
def add_contact(state: SocialState, user_name: str) -> dict:
    """Add a user to the logged-in user's contacts; returns the contact's user id.

    Args:
        user_name: Name of the user to add, e.g. 'Bob'.
    """
    me = _message_user(state)
    messaging = state.messaging
    uid = find(messaging.user_map, user_name, "user")
    if uid == me:
        raise ToolError("you cannot add yourself as a contact")
    cur = messaging.contacts.get(me, [])
    if user_name in cur:
        raise ToolError(f"{user_name!r} is already a contact")
    messaging.contacts[me] = cur + [user_name]
    return {"added_status": True, "user_name": user_name, "user_id": uid}


@tool(prerequisites=[MESSAGE_AUTH], writes={"message_match:{params.keyword}": "result.messages.0.message"})
def search_messages(state: SocialState, keyword: str) -> dict:
    """Search the logged-in user's sent and received messages for a keyword (case-insensitive), newest first.

    Args:
        keyword: Word or phrase to look for.
    """
    me = _message_user(state)
    k = keyword.lower().strip()
    if not k:
        raise ToolError("empty search keyword")
    hits = [
        x
        for x in sorted(state.messaging.messages, key=lambda x: -x.id)
        if me in (x.sender_id, x.receiver_id) and k in x.message.lower()
    ]
    return {"keyword": keyword, "messages": [x.model_dump() for x in hits]}


@tool(prerequisites=[MESSAGE_AUTH])
def get_message_stats(state: SocialState) -> dict:
    """Count the logged-in user's sent messages, received messages and contacts."""
    me = _message_user(state)
    messaging = state.messaging
    return {
        "user_id": me,
        "sent_count": sum(x.sender_id == me for x in messaging.messages),
        "received_count": sum(x.receiver_id == me for x in messaging.messages),
        "contacts_count": len(messaging.contacts.get(me, [])),
    }
