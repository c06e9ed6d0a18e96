"""State of the simulated social domain: a posting service and a messaging service.

Two independent sub-states, each with its own session (BFCL TwitterAPI and
MessageAPI style). Reference data (accounts, credentials, existing tweets,
messages, follow graph) lives in ``data.json`` beside this module, a section
per sub-state (the models hold structure only); a scenario may override any
field of either. Ids come from counters kept in the state (no clock, no
randomness).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..base import ReferenceData


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


class PostingState(_M, ReferenceData):
    data_section = ("posting",)
    users: list[str]  # registered handles
    passwords: dict[str, str]  # handle -> password
    authenticated: bool
    username: str | None  # the logged-in handle
    following: dict[str, list[str]]
    tweets: list[Tweet]
    retweets: dict[str, list[int]]  # handle -> retweeted tweet ids
    next_tweet_id: int  # counter; raised above every existing id on load

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


class MessagingState(_M, ReferenceData):
    data_section = ("messaging",)
    user_map: dict[str, str]  # user name -> user id
    logged_in: bool
    current_user: str | None  # the logged-in user id
    messages: list[Message]
    contacts: dict[str, list[str]]  # user id -> contact names
    next_message_id: int  # counter; raised above every existing id on load

    @model_validator(mode="after")
    def _counter(self) -> MessagingState:
        top = max((m.id for m in self.messages), default=-1) + 1
        if self.next_message_id < top:
            self.next_message_id = top
        if self.logged_in and self.current_user not in self.user_map.values():
            raise ValueError(f"logged-in user id {self.current_user!r} is not in user_map")
        return self


class SocialState(_M, ReferenceData):
    posting: PostingState
    messaging: MessagingState
