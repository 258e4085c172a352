"""What the viewer says about each task's predictions, keyed by the task's name: the phrases attend.py prints, the
Attention tab's panel shows (answers.py sends them as an answer's `words`; index.js holds none of its own) and the
counterfactual sentence is built from. A new task brings its entry here; the task itself (task/) says nothing."""

from dataclasses import dataclass, replace

from task import Task
from task.fill_blank import MARKER


@dataclass(frozen=True)
class Words:
    """How the viewer speaks of a task's predictions. A phrase in braces ("{at}") is a template: the panel fills in
    the named value. An empty phrase: the task has no such thing (no blanks to hide, no note under the strip)."""

    target: str  # what a position is asked to predict: "next token"
    missing: str  # a position with none: "the text ends here"
    no_counterfactual: str  # why a query has no counterfactual
    masked: str  # the look with the keys the mask hides from the query taken away, in a few words: "future masked"
    hiding: str  # taking them away, for a model that reads them: "masking the future"
    read: str  # taking them away takes the target's probability far down
    partly: str  # takes part of it
    elsewhere: str  # raises it far up
    too_short: str  # attend.py's refusal of a text with nothing to score
    applied: str  # how the run reads with the task's mask applied, on the panel's line of switches
    lifted: str  # and with it lifted (model.causal=false)
    before: str  # the keys before a query: "the past"
    after: str  # and after it: "the future"
    strip_caption: str  # what the loss strip colours each token by
    strip_note: str  # said once under the strip: what its terms are not
    top_caption: str  # the pointed query's top five ({at}: the query, {five}: the top five, {both}: the strips)
    points: str  # what the pointed token is asked to predict ({target}: it, or `missing`)
    write: str  # the button that writes: "Continue the text"
    writing: str  # while it writes ({tokens}: how many)
    blank_hint: str  # how to make a blank, under the text; "": the task hides no token
    blank_how: str  # the same in the panel, with how to hide a token there; "": the task hides no token


NEXT_TOKEN = Words(
    target="next token",
    missing="the text ends here",
    no_counterfactual="what the look contributes needs the next token: the text has none after this query",
    masked="future masked",
    hiding="masking the future",
    read="the prediction was read, not inferred",
    partly="part of the prediction was read, part inferred",
    elsewhere="what it read ahead pointed elsewhere",
    too_short="one token, so there is no next token to score; give two or more",
    applied="the mask hides the future",
    lifted="no mask: reads the future",
    before="the past",
    after="the future",
    strip_caption="Each token coloured by the loss of predicting the token after it (the text's last token has none):",
    strip_note="",
    top_caption="After {at}, the next token: {five}{both}",
    points=" → {target}",
    write="Continue the text",
    writing="writing {tokens} tokens…",
    blank_hint="",
    blank_how="",
)

WORDS: dict[str, Words] = {
    "next_token": NEXT_TOKEN,
    # A query inside the prefix has no target, as the text's last token has none: it is not scored, not missing.
    "prefix_lm": replace(
        NEXT_TOKEN,
        missing="nothing scored here: the prefix, or the text's end",
        no_counterfactual="what the look contributes needs a scored next token: this query is in the prefix or ends "
        "the text",
        too_short="the text ends inside the prefix, where nothing is scored: give more tokens than the prefix holds",
        applied="the mask hides the future after the prefix, which reads both ways",
        strip_caption="Each token after the prefix coloured by the loss of predicting the token after it (the "
        "prefix's tokens are not scored, and the text's last token has none):",
    ),
    "fill_blank": Words(
        target="hidden token",
        missing="a blank typed in the text, which does not say which token it hides",
        no_counterfactual="what the look contributes is shown for a blank: point at one, or hide this token",
        masked="right side hidden",
        hiding="hiding the right side",
        read="the blank was filled from both sides",
        partly="the right side filled part of it",
        elsewhere="what it read on the right pointed elsewhere",
        too_short=f"every token is a blank: give some text around the blanks (a literal {MARKER} is \\{MARKER})",
        applied="fills blanks · the mask hides the right side: reads the left of a blank",
        lifted="fills blanks · no mask: reads both sides of a blank",
        before="the left",
        after="the right",
        strip_caption="Each token coloured by the loss of predicting it when it alone is hidden behind the blank (a "
        "blank typed in the text hides a token the text does not say):",
        # Salazar et al. 2020's pseudo-log-likelihood.
        strip_note="Not a likelihood: each token is scored with every other token of the text visible, so these "
        "terms do not add up to the text's log-probability (their sum is a pseudo-log-likelihood, Salazar et al. "
        "2020).",
        top_caption="With {at} alone hidden behind the blank, the token there: {five}",
        points="",  # a token hidden alone is asked for itself
        write="Fill the blanks",
        writing="filling the blanks…",
        blank_hint=f"Runs that fill blanks (task=fill_blank): type {MARKER} in the text for a blank (\\{MARKER} types "
        "the character itself), or shift-click a token in such a run's panel to hide it behind the blank there.",
        blank_how=f"□ is the blank: type {MARKER} in the text for one. To hide a token in this panel only, "
        "shift-click it (in the strip, or its row of the heat map), or press Hide above its top five; a click keeps "
        "a query, as anywhere.",
    ),
}


def words_of(task: Task) -> Words:
    """The viewer's words for a task, by its name."""
    return WORDS[task.name]
