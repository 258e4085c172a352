"""When the loop logs, evaluates and saves: every so many steps, and always at the last step."""

from dataclasses import dataclass

from trainer.config import TrainerConfig


@dataclass(frozen=True)
class Schedule:
    max_steps: int
    log_interval: int
    eval_interval: int
    ckpt_interval: int

    @classmethod
    def of(cls, settings: TrainerConfig) -> "Schedule":
        return cls(settings.max_steps, settings.log_interval, settings.eval_interval, settings.ckpt_interval)

    def steps(self, done: int) -> range:
        """The steps still to train after `done` of them."""
        return range(done + 1, self.max_steps + 1)

    def is_last(self, step: int) -> bool:
        return step == self.max_steps

    def logs(self, step: int) -> bool:
        """The mean training loss, the learning rate and the throughput since the last log step."""
        return step % self.log_interval == 0 or self.is_last(step)

    def evaluates(self, step: int) -> bool:
        """Both splits' losses, the attention diagnostics and a sample (step 0 too, before training)."""
        return step % self.eval_interval == 0 or self.is_last(step)

    def saves(self, step: int) -> bool:
        """last.pt, to resume from."""
        return step % self.ckpt_interval == 0 or self.is_last(step)

    def reads_loss(self, step: int) -> bool:
        """Whether the loop waits for the device at this step anyway: then checking the loss is free."""
        return self.logs(step) or self.evaluates(step) or self.saves(step)

    def window(self, step: int) -> int:
        """How many steps the log window ending at `step` holds: log_interval, or fewer at the last step."""
        return step % self.log_interval or self.log_interval
