"""recordkit's error types keep their location across process boundaries (multiprocessing, Ray)."""
import pickle

from recordkit.errors import ErrorBudgetExceeded, FormatError


def test_format_error_pickles_with_its_file_and_position():
    e = FormatError("data.ctf", "expected a value", line=3, column=7, record="sequence 2")
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is FormatError and str(back) == str(e)
    assert (back.path, back.line, back.column, back.record) == ("data.ctf", 3, 7, "sequence 2")


def test_budget_error_pickles_with_its_cause_and_counts():
    e = ErrorBudgetExceeded(FormatError("x.cbf", "bad", offset=40), errors_seen=3, max_errors=2)
    back = pickle.loads(pickle.dumps(e))
    assert str(back) == str(e) and back.errors_seen == 3 and back.offset == 40 and back.cause.path == "x.cbf"
