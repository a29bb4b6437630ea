# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Text from input (host names, values, file names) made safe to print on a terminal.

A name from an inventory can hold characters that act instead of showing: C0 controls (ESC
starts sequences that set the window title or reset the terminal, CR overwrites a line),
DEL, C1 controls (U+009B is a one-character CSI), bidirectional overrides and isolates
(U+202E, U+2066) that reorder what follows, zero-width characters that hide text, line and
paragraph separators. Every one of them is written as a visible escape (``\\x1b``,
``\\u202e``): the Unicode categories Cc, Cf, Cs (lone surrogates, from file names that are
not UTF-8), Zl and Zp, decided by the running Python's own Unicode tables.

``escape`` is for one value (a newline is escaped too, so it cannot start a line);
``visible`` is for a whole message or output, whose own newlines stay.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import unicodedata

UNSAFE_CATEGORIES = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))
_ASCII_UNSAFE = re.compile("[\x00-\x1f\x7f]")
_ASCII_UNSAFE_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f]")


def _code(char):
    number = ord(char)
    if number < 0x100:
        return "\\x%02x" % number
    if number < 0x10000:
        return "\\u%04x" % number
    return "\\U%08x" % number


def _unsafe(char):
    return (char < " " or char >= "\x7f") and unicodedata.category(char) in UNSAFE_CATEGORIES


def _escaped(text, keep_newlines):
    if text.isascii():
        pattern = _ASCII_UNSAFE_BUT_NEWLINE if keep_newlines else _ASCII_UNSAFE
        return pattern.sub(lambda match: _code(match.group(0)), text) if pattern.search(text) else text
    return "".join(_code(char) if _unsafe(char) and not (keep_newlines and char == "\n") else char
                   for char in text)


def escape(text):
    """``text`` with every character that is not shown as itself (controls, newline
    included, bidi and zero-width characters) written as an escape, so a host name or value
    printed in an error or a table can never start a line, reorder it or drive the terminal."""
    return _escaped(text if isinstance(text, str) else str(text), keep_newlines=False)


def visible(text):
    """The same for a whole message or output: its newlines stay, everything else that is
    not shown as itself is escaped."""
    return _escaped(text if isinstance(text, str) else str(text), keep_newlines=True)
