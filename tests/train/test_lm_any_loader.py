"""train_lm takes what calc_loss_loader takes: a list of (input, target) batches or the book's
torch DataLoader trains exactly as npattn's loader giving the same batches (it raised
AttributeError: no attribute 'batches'); resuming inside an epoch needs npattn's loader, and
something without a length is refused naming train_loader or val_loader."""

import numpy as np
import pytest

import npattn
from npattn.errors import ConfigError, TrainingError
from npattn.optim import AdamW

TEXT = open("README.md", encoding="utf-8").read()[:2000]
TOK = npattn.CharTokenizer.train(TEXT)
CFG = dict(vocab_size=TOK.vocab_size, context_length=8, emb_dim=8, n_heads=2, n_layers=1, drop_rate=0.0, qkv_bias=False)
TRAIN = npattn.create_dataloader_v1(TEXT[:400], 4, 8, 8, shuffle=False, tokenizer=TOK)
VAL = npattn.create_dataloader_v1(TEXT[400:600], 2, 8, 8, shuffle=False, drop_last=False, tokenizer=TOK)


def train(loader, val=VAL, **kw):
    model = npattn.GPTModel(CFG, rng=3, dtype=np.float64)
    opt = AdamW(model.parameters(), lr=0.01)
    kw = {"out": None, "sample_tokens": 3, **kw}
    history = npattn.train_lm(model, loader, val, opt, 2, 5, 2, "The", TOK, **kw)
    return history, [p.data.copy() for p in model.parameters()]


def same(a, b):
    (ha, wa), (hb, wb) = a, b
    assert ha.train_losses == hb.train_losses and ha.val_losses == hb.val_losses and ha.samples == hb.samples
    assert (ha.global_step, ha.epoch, ha.batch, ha.tokens_seen) == (hb.global_step, hb.epoch, hb.batch, hb.tokens_seen)
    assert all(np.array_equal(x, y) for x, y in zip(wa, wb))


def test_a_list_of_batches_trains_as_npattns_loader():
    reference = train(TRAIN)
    assert reference[0].epoch == 2 and len(TRAIN) == 12
    same(train(list(TRAIN), val=list(VAL)), reference)


def test_the_books_torch_dataloader_trains_as_npattns_loader():
    torch = pytest.importorskip("torch")

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return len(TRAIN.dataset)

        def __getitem__(self, i):
            x, y = TRAIN.dataset[i]
            return torch.tensor(x), torch.tensor(y)

    book = torch.utils.data.DataLoader(Windows(), batch_size=4, shuffle=False, drop_last=True)
    same(train(book), train(TRAIN))


def test_resuming_inside_an_epoch_needs_npattns_loader():
    history, _ = train(TRAIN, max_steps=3)
    model = npattn.GPTModel(CFG, rng=3)
    needs = r"batch 3 inside epoch 0; resuming inside an epoch needs npattn's DataLoader.*list"
    with pytest.raises(ConfigError, match=needs):
        npattn.train_lm(model, list(TRAIN), VAL, AdamW(model.parameters()), 2, 5, 2, "The", TOK, history=history)


@pytest.mark.parametrize("where", ["train_loader", "val_loader"])
def test_a_loader_without_a_length_is_refused_naming_it(where):
    loaders = {"train_loader": TRAIN, "val_loader": VAL}
    loaders[where] = iter(list(loaders[where]))
    model = npattn.GPTModel(CFG, rng=3)
    refused = rf"train_lm: {where} must be a loader of \(input, target\) batches with a length.*list_iterator"
    with pytest.raises(ConfigError, match=refused):
        npattn.train_lm(model, *loaders.values(), AdamW(model.parameters()), 1, 5, 2, "The", TOK)


def test_a_loader_giving_fewer_batches_than_its_length_is_refused():
    class Short(list):
        def __len__(self):
            return super().__len__() + 1

    gave = r"train_loader gave 12 batches in epoch 0, not the 13 its len\(\) gives; .* updated through step 11"
    with pytest.raises(TrainingError, match=gave):
        train(Short(TRAIN))


def test_a_shuffled_torch_loader_gives_the_books_first_batch(monkeypatch):
    """No iterator is made to check a loader: a torch DataLoader's iterator draws its seed from
    torch's stream, so checking by iterating moved the book's shuffled order on by two draws."""
    torch = pytest.importorskip("torch")
    import npattn.train.lm as lm

    class Windows(torch.utils.data.Dataset):
        def __len__(self):
            return len(TRAIN.dataset)

        def __getitem__(self, i):
            return tuple(torch.tensor(a) for a in TRAIN.dataset[i])

    def book_loader():
        torch.manual_seed(123)
        return torch.utils.data.DataLoader(Windows(), batch_size=4, shuffle=True, drop_last=True)

    book_first = next(iter(book_loader()))[0].numpy()  # `for x, y in train_loader`'s first batch
    seen = []
    calc = lm.calc_loss_batch
    monkeypatch.setattr(lm, "calc_loss_batch", lambda x, y, model: seen.append(np.asarray(x)) or calc(x, y, model))
    train(book_loader(), max_steps=1)
    np.testing.assert_array_equal(seen[0], book_first)
