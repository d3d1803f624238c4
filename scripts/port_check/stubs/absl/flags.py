FLAGS = {}   # no flag is ever present: every lookup is a KeyError


def _define(name, default, *args, **kwargs):
    return None


DEFINE_bool = DEFINE_boolean = DEFINE_integer = DEFINE_float = _define
DEFINE_string = DEFINE_enum = DEFINE_enum_class = _define
