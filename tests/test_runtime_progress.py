"""runtime.use_progress_bar: the bar a learner reads after training, including an early stop."""

from types import SimpleNamespace

from kimina_edu.runtime import use_progress_bar


class _Trainer:
    def __init__(self):
        self.callback_handler = SimpleNamespace(callbacks=[])
        self.added = []

    def add_callback(self, callback):
        self.added.append(callback)

    def remove_callback(self, callback):
        pass


def _run(steps_done, max_steps, capsys):
    trainer = use_progress_bar(_Trainer(), "SFT")
    (bar,) = trainer.added
    bar.on_train_begin(None, SimpleNamespace(max_steps=max_steps, global_step=0), None)
    for step in range(1, steps_done + 1):
        bar.on_step_end(None, SimpleNamespace(global_step=step), None)
    bar.on_train_end(None, SimpleNamespace(global_step=steps_done), None)
    return capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]


def test_an_early_stop_leaves_a_full_bar_that_says_so(capsys):
    last = _run(5, 10, capsys)
    assert "100%" in last and "5/5" in last and "stopped early: 5 of 10 steps" in last, last


def test_a_full_run_reads_as_it_ran(capsys):
    last = _run(10, 10, capsys)
    assert "100%" in last and "10/10" in last and "stopped early" not in last, last
