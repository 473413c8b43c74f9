"""``typing.NamedTuple``, made without typing's check of each field's annotation.

Every record of the three packages is a NamedTuple class. Under ``from __future__
import annotations`` each field's annotation is a string, and typing turns each into a
``ForwardRef``, compiling it, when the class is made: some 200 fields on the path of one
``harness-sandbox run``, about 3 ms of its start. Nothing reads those annotations back.
This makes the same class, ``collections.namedtuple``'s, as typing does (its fields,
defaults, module, docstring and methods; the same refusals), and keeps each annotation
as written. Type checkers see typing's own.

It lives in the package the other two import (pathguard imports neither), and imports
only ``collections``, which typing itself imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:
    import collections

    # As typing.NamedTupleMeta has them.
    _SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__",
                             "_fields", "_field_defaults", "_make", "_replace", "_asdict",
                             "_source"})

    class _Maker(type):
        def __new__(cls, name, bases, ns):
            if ns.get("_records_base"):
                return super().__new__(cls, name, bases, ns)
            if bases != (NamedTuple,):
                raise TypeError("a NamedTuple record can only inherit from NamedTuple")
            fields = ns.get("__annotations__", {})
            with_default: list[str] = []
            for field in fields:
                if field in ns:
                    with_default.append(field)
                elif with_default:
                    raise TypeError(f"Non-default namedtuple field {field} cannot follow "
                                    f"default field{'s' if len(with_default) > 1 else ''} "
                                    f"{', '.join(with_default)}")
            made = collections.namedtuple(name, list(fields),
                                          defaults=[ns[f] for f in with_default],
                                          module=ns["__module__"])
            made.__annotations__ = made.__new__.__annotations__ = dict(fields)
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError("Cannot overwrite NamedTuple attribute " + key)
                if key not in _SPECIAL and key not in made._fields:
                    setattr(made, key, value)
            return made

    class NamedTuple(metaclass=_Maker):
        """Subclass it as ``typing.NamedTuple``; the subclass is a plain namedtuple."""

        _records_base = True
