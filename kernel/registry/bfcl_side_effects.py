"""Which of BFCL's multi-turn functions have side effects: a map for its 8 classes.

BFCL's function docs (``bfcl_eval/data/multi_turn_func_doc/*.json``) say
nothing about side effects, so the BFCL importer looks each function up here.

How it was decided (bfcl-eval 2026.3.23, classes in
``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``): a function has
a side effect when a call can change the state of its class instance, i.e.
any instance attribute except ``_random`` (the class's random generator) and
TravelAPI's ``_flight_cost_lookup`` (a memo of computed prices, which changes
no later answer). That includes private state such as GorillaFileSystem's
``_current_dir``: ``cd`` changes what every later ``ls`` returns, so it is
not read-only, although bfcl's checker compares public attributes only. A
login that may find the user already logged in still counts as
side-effecting: it can change the state.

Each entry was read off the source and then checked two ways by
``tests/test_registry_fidelity.py`` (where bfcl-eval is installed):
replaying every ground-truth call of ``BFCL_v4_multi_turn_base`` on the real
classes, a read-only function never changes the state and every
side-effecting one that is called changes it at least once; and a read-only
function's source assigns to no attribute of ``self``.

A BFCL function not in this map (other BFCL categories, other files) is
taken as side-effecting, with a note: like MCP's default for a tool without
annotations, it is not assumed harmless.
"""

from __future__ import annotations

# class -> function -> has side effects
BFCL_CLASS_SIDE_EFFECTS: dict[str, dict[str, bool]] = {
    "GorillaFileSystem": {
        "cat": False, "cd": True, "cp": True, "diff": False, "du": False, "echo": True,
        "find": False, "grep": False, "ls": False, "mkdir": True, "mv": True, "pwd": False,
        "rm": True, "rmdir": True, "sort": False, "tail": False, "touch": True, "wc": False,
    },
    # Stateless: every function computes its answer from its arguments.
    "MathAPI": {
        "absolute_value": False, "add": False, "divide": False, "imperial_si_conversion": False,
        "logarithm": False, "max_value": False, "mean": False, "min_value": False, "multiply": False,
        "percentage": False, "power": False, "round_number": False, "si_unit_conversion": False,
        "square_root": False, "standard_deviation": False, "subtract": False, "sum_values": False,
    },
    "MessageAPI": {
        "add_contact": True, "delete_message": True, "get_message_stats": False, "get_user_id": False,
        "list_users": False, "message_get_login_status": False, "message_login": True,
        "search_messages": False, "send_message": True, "view_messages_sent": False,
    },
    "TwitterAPI": {
        "authenticate_twitter": True, "comment": True, "follow_user": True, "get_tweet": False,
        "get_tweet_comments": False, "get_user_stats": False, "get_user_tweets": False,
        "list_all_following": False, "mention": True, "post_tweet": True,
        "posting_get_login_status": False, "retweet": True, "search_tweets": False, "unfollow_user": True,
    },
    "TicketAPI": {
        "close_ticket": True, "create_ticket": True, "edit_ticket": True, "get_ticket": False,
        "get_user_tickets": False, "logout": True, "resolve_ticket": True,
        "ticket_get_login_status": False, "ticket_login": True,
    },
    "TradingBot": {
        "add_to_watchlist": True, "cancel_order": True, "filter_stocks_by_price": False,
        "fund_account": True, "get_account_info": False, "get_available_stocks": False,
        "get_current_time": False, "get_order_details": False, "get_order_history": False,
        "get_stock_info": False, "get_symbol_by_name": False, "get_transaction_history": False,
        "get_watchlist": False, "notify_price_change": False, "place_order": True,
        "remove_stock_from_watchlist": True, "trading_get_login_status": False, "trading_login": True,
        "trading_logout": True, "withdraw_funds": True,
    },
    "TravelAPI": {
        "authenticate_travel": True, "book_flight": True, "cancel_booking": True,
        "compute_exchange_rate": False, "contact_customer_support": False, "get_all_credit_cards": False,
        "get_booking_history": False, "get_budget_fiscal_year": False, "get_credit_card_balance": False,
        "get_flight_cost": False, "get_nearest_airport_by_city": False, "list_all_airports": False,
        "purchase_insurance": True, "register_credit_card": True, "retrieve_invoice": False,
        "set_budget_limit": True, "travel_get_login_status": False, "verify_traveler_information": False,
    },
    "VehicleControlAPI": {
        "activateParkingBrake": True, "adjustClimateControl": True, "check_tire_pressure": False,
        "displayCarStatus": False, "display_log": False, "estimate_distance": False,
        "estimate_drive_feasibility_by_mileage": False, "fillFuelTank": True,
        "find_nearest_tire_shop": False, "gallon_to_liter": False, "get_current_speed": False,
        "get_outside_temperature_from_google": False, "get_outside_temperature_from_weather_com": False,
        "get_zipcode_based_on_city": False, "liter_to_gallon": False, "lockDoors": True,
        "pressBrakePedal": True, "releaseBrakePedal": True, "setCruiseControl": True,
        "setHeadlights": True, "set_navigation": True, "startEngine": True,
    },
}  # fmt: skip

# BFCL's 128 multi-turn function names are unique across the 8 classes (a test checks it), so a
# flat lookup by name is exact.
BFCL_SIDE_EFFECTS: dict[str, bool] = {
    fn: effect for functions in BFCL_CLASS_SIDE_EFFECTS.values() for fn, effect in functions.items()
}
