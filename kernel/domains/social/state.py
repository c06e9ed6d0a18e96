"""State of the simulated social domain: a posting service and a messaging service.

Two independent sub-states, each with its own session (BFCL TwitterAPI and
MessageAPI style). Reference data (accounts, credentials, existing tweets,
messages, follow graph) are state defaults; a scenario may override any
field. Ids come from counters kept in the state (no clock, no randomness).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------ posting
class Comment(_M):
    username: str
    content: str


class Tweet(_M):
    id: int
    username: str
    content: str
    tags: list[str] = Field(default_factory=list)
    mentions: list[str] = Field(default_factory=list)
    comments: list[Comment] = Field(default_factory=list)


POSTING_USERS = [
    "techguru",
    "nightowl",
    "green_thumb",
    "chef_maria",
    "bookworm",
    "runner_max",
    "pixel_art",
    "jazz_cat",
    "trail_blazer",
    "data_dan",
]


def _default_passwords() -> dict[str, str]:
    return {u: f"{u}_pw42" for u in POSTING_USERS}


def _default_following() -> dict[str, list[str]]:
    return {
        "techguru": ["data_dan", "pixel_art"],
        "nightowl": ["jazz_cat"],
        "green_thumb": ["chef_maria", "trail_blazer"],
        "chef_maria": ["green_thumb"],
        "bookworm": ["nightowl", "jazz_cat", "techguru"],
        "data_dan": ["techguru"],
    }


def _default_tweets() -> list[Tweet]:
    rows = [
        ("techguru", "New laptop benchmarks are out, the battery life is impressive", ["#tech"], []),
        ("nightowl", "Late night coding session with a fresh pot of coffee", ["#coding"], []),
        ("green_thumb", "My tomato plants finally bloomed this week", ["#garden"], []),
        ("chef_maria", "Sharing my grandmother's lasagna recipe tomorrow", ["#recipe", "#food"], []),
        ("bookworm", "Just finished a wonderful mystery novel, highly recommend it", ["#books"], ["nightowl"]),
        ("runner_max", "Morning run along the river: 10 km in 48 minutes", ["#running"], []),
        ("pixel_art", "A tiny pixel castle I drew during lunch", ["#art"], []),
        ("jazz_cat", "Live jazz at the corner cafe tonight", ["#music"], []),
        ("data_dan", "Cleaning a messy dataset is half of every analysis", ["#data"], ["techguru"]),
        ("techguru", "Which coding font do you prefer for long sessions?", ["#coding"], []),
    ]
    return [Tweet(id=i, username=u, content=c, tags=t, mentions=m) for i, (u, c, t, m) in enumerate(rows)]


class PostingState(_M):
    users: list[str] = Field(default_factory=lambda: list(POSTING_USERS))  # registered handles
    passwords: dict[str, str] = Field(default_factory=_default_passwords)  # handle -> password
    authenticated: bool = False
    username: str | None = None  # the logged-in handle
    following: dict[str, list[str]] = Field(default_factory=_default_following)
    tweets: list[Tweet] = Field(default_factory=_default_tweets)
    retweets: dict[str, list[int]] = Field(default_factory=dict)  # handle -> retweeted tweet ids
    next_tweet_id: int = 0  # counter; raised above every existing id on load

    @model_validator(mode="after")
    def _counter(self) -> PostingState:
        top = max((t.id for t in self.tweets), default=-1) + 1
        if self.next_tweet_id < top:
            self.next_tweet_id = top
        if self.authenticated and self.username not in self.users:
            raise ValueError(f"logged-in user {self.username!r} is not a registered user")
        return self


# ---------------------------------------------------------------- messaging
class Message(_M):
    id: int
    sender_id: str
    receiver_id: str
    message: str


def _default_user_map() -> dict[str, str]:
    names = ["Alice", "Bob", "Catherine", "Daniel", "Eve", "Frank", "Grace", "Henry", "Irene", "Jack"]
    return {n: f"USR{i + 1:03d}" for i, n in enumerate(names)}


def _default_messages() -> list[Message]:
    rows = [
        ("USR001", "USR002", "Are we still on for lunch on Friday?"),
        ("USR002", "USR001", "Yes, see you at noon."),
        ("USR003", "USR001", "The quarterly report draft is ready for review."),
        ("USR001", "USR004", "Can you send me the slides from the workshop?"),
        ("USR005", "USR003", "Happy birthday! Hope you have a great day."),
    ]
    return [Message(id=i, sender_id=s, receiver_id=r, message=m) for i, (s, r, m) in enumerate(rows)]


def _default_contacts() -> dict[str, list[str]]:
    return {"USR001": ["Bob", "Daniel"], "USR003": ["Alice"]}


class MessagingState(_M):
    user_map: dict[str, str] = Field(default_factory=_default_user_map)  # user name -> user id
    logged_in: bool = False
    current_user: str | None = None  # the logged-in user id
    messages: list[Message] = Field(default_factory=_default_messages)
    contacts: dict[str, list[str]] = Field(default_factory=_default_contacts)  # user id -> contact names
    next_message_id: int = 0  # counter; raised above every existing id on load

    @model_validator(mode="after")
    def _counter(self) -> MessagingState:
        top = max((m.id for m in self.messages), default=-1) + 1
        if self.next_message_id < top:
            self.next_message_id = top
        if self.logged_in and self.current_user not in self.user_map.values():
            raise ValueError(f"logged-in user id {self.current_user!r} is not in user_map")
        return self


class SocialState(_M):
    posting: PostingState = Field(default_factory=PostingState)
    messaging: MessagingState = Field(default_factory=MessagingState)
