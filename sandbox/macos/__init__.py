"""The macOS box: Seatbelt through ``sandbox-exec`` (:mod:`.macbox`, :mod:`.seatbelt`),
and the system's facts it needs (:mod:`.darwin`)."""
