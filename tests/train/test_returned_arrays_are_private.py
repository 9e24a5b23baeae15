"""Arrays handed out that shared memory with the library's own state: ``GPTDatasetV1[i]`` returned
views of the dataset's windows (an edit changed the loader's later batches) and
``History.state_dict()`` the history's start and last-log weights (an edit changed the history)."""

import numpy as np

import npattn
from npattn.optim import Adam
from npattn.train.tasks import TeacherStudent


def test_a_dataset_item_is_a_copy():
    text = npattn.default_corpus()[:3000]
    tok = npattn.CharTokenizer.train(text)
    loader = npattn.create_dataloader_v1(text, batch_size=2, max_length=8, stride=8, shuffle=False, tokenizer=tok)
    first = next(iter(loader))[0][0].copy()
    x, y = loader.dataset[0]
    x[...] = 0
    y[...] = 0
    np.testing.assert_array_equal(next(iter(loader))[0][0], first)


def test_a_history_state_dict_shares_no_memory():
    task = TeacherStudent(seed=7)
    model = task.make_model()
    history = npattn.fit(model, Adam(model.parameters(), lr=0.05), task.criterion, task.batch, 4, log_every=2)
    before = history.copy()
    state = history.state_dict()
    for part in ("start", "last_log"):
        for v in state[part].values():
            v[...] = 99.0
    state["loss"][...] = -1.0
    for name in history.start:
        np.testing.assert_array_equal(history.start[name], before.start[name])
        np.testing.assert_array_equal(history.last_log[name], before.last_log[name])
    assert history.loss == before.loss
