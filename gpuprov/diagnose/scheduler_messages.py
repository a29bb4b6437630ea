"""The kube-scheduler's FailedScheduling messages, split into counted reasons."""

import re


# A message as the scheduler writes it:
#
# "0/9 nodes are available: 1 node(s) had untolerated taint {dedicated: llm-serving},
#  2 Insufficient nvidia.com/gpu, 6 node(s) didn't match Pod's node affinity/selector.
#  preemption: 0/9 nodes are available: 2 No preemption victims found for incoming pod, ..."

_MESSAGE_HEAD = re.compile(r"^\s*(\d+)/(\d+) nodes are available:?\s*(.*)\Z", re.S | re.ASCII)
_REASON_SPLIT = re.compile(r",\s+(?=\d+\s)", re.ASCII)

# (category, pattern) in the order they are tried; the first match names the reason.
_REASON_PATTERNS = (
    ("insufficient", re.compile(r"^Insufficient (?P<detail>\S+)\Z")),
    ("cordoned", re.compile(r"^node\(s\) were unschedulable\Z")),
    ("cordoned", re.compile(r"^node\(s\) had (?:untolerated )?taint \{node\.kubernetes\.io/unschedulable: ?\}")),
    ("not-ready", re.compile(r"^node\(s\) had (?:untolerated )?taint "
                             r"\{node\.kubernetes\.io/(?:not-ready|unreachable)")),
    ("taint", re.compile(r"^node\(s\) had (?:untolerated )?taint (?P<detail>\{[^}]*\})")),
    ("selector", re.compile(r"^node\(s\) didn't match Pod's node affinity(?:/selector)?\Z")),
    ("selector", re.compile(r"^node\(s\) didn't match node selector\Z")),
    ("pod-affinity", re.compile(r"^node\(s\) didn't (?:match pod (?:anti-)?affinity rules|satisfy existing pods "
                                r"anti-affinity rules)")),
    ("topology-spread", re.compile(r"^node\(s\) didn't match pod topology spread constraints")),
    ("volume", re.compile(r"volume|persistent")),
    ("ports", re.compile(r"free ports")),
    ("too-many-pods", re.compile(r"^Too many pods\Z")),
)


def parse_scheduler_message(message):
    """Split a FailedScheduling message into [{count, reason, category, detail}].

    Returns [] for messages of another form (the report then quotes the message as is).
    The preemption part after ". preemption:" says why preemption would not help and is
    left out.
    """
    match = _MESSAGE_HEAD.match(message or "")
    if not match:
        return []
    body = match.group(3)
    body = re.split(r"\.?\s+preemption:", body, maxsplit=1)[0].strip().rstrip(".")
    reasons = []
    for part in _REASON_SPLIT.split(body):
        part_match = re.match(r"^(\d+)\s+(.*)\Z", part.strip(), re.ASCII)
        if not part_match:
            continue
        count, text = int(part_match.group(1)), part_match.group(2).strip()
        category, detail = "other", ""
        for name, pattern in _REASON_PATTERNS:
            found = pattern.search(text)
            if found:
                category = name
                detail = found.groupdict().get("detail") or ""
                break
        reasons.append({"count": count, "reason": text, "category": category, "detail": detail})
    return reasons
