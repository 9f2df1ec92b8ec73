"""The run's checkpoint callback, which keeps its record of the best checkpoint when the run
directory is moved or copied.

Lightning's :class:`ModelCheckpoint` stores its folder's absolute path in every checkpoint and,
when a resumed run's folder differs (the run directory was moved, copied to another machine, or
reached through another mount), drops ``best_model_score`` and the top-k record with a warning.
The resumed run then takes its first new epoch as the best whatever it scored, and leaves the
true best checkpoint behind as a stray file. Here the stored paths are re-based onto the current
folder by file name: a callback's checkpoints always live in its own folder, so the file name is
all that identifies them, and nothing outside the current run directory is ever touched (a copy
never deletes a file of the run it was copied from).
"""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.callbacks import ModelCheckpoint

_PATH_KEYS = ("best_model_path", "kth_best_model_path", "last_model_path")


class RelocatableModelCheckpoint(ModelCheckpoint):
    @property
    def state_key(self) -> str:
        # Lightning's own key (prefixed by the class name), so checkpoints written by plain
        # ModelCheckpoint callbacks (older runs) restore into this one and the other way round.
        return "ModelCheckpoint" + super().state_key[len(type(self).__qualname__) :]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        stored = state_dict.get("dirpath")
        if self.dirpath is not None and stored is not None and stored != self.dirpath:
            state_dict = dict(state_dict)
            for key in _PATH_KEYS:
                if state_dict.get(key):
                    state_dict[key] = self._here(state_dict[key])
            if isinstance(state_dict.get("best_k_models"), dict):
                state_dict["best_k_models"] = {self._here(k): v for k, v in state_dict["best_k_models"].items()}
            state_dict["dirpath"] = self.dirpath
        super().load_state_dict(state_dict)

    def _here(self, path: str) -> str:
        assert self.dirpath is not None  # load_state_dict re-bases only onto a folder
        return os.path.join(self.dirpath, os.path.basename(path))
