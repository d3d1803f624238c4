import sys

_after_init = []


def call_after_init(callback):
    _after_init.append(callback)


def run(main, argv=None):
    for callback in _after_init:
        callback()
    main(list(argv or sys.argv))
