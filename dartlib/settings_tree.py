"""The settings tree: every setting a profile may set, stated once, with its type, its default, its
range or the names it may take, and why it has that value.

One section per study (a frozen dataclass), in the way of a commented default tree; the defaults
are the smoke profile's values (the suite's default run: Fashion-MNIST and a small CNN on two CPU
cores), the paper's value named beside each where it differs. A profile
(``notebooks/profiles/<name>.yaml``) holds only what differs, along one chain of ``extends:``
(smoke <- cpu <- gpu <- paper-c10 / paper).

Each setting keeps one flat name, its ``key`` (``dart_alpha`` for ``Dart.alpha``): the name a
profile's YAML, a notebook's ``parameters`` cell and papermill use, and under which stored rows
were keyed. Code reads the typed tree, ``settings.dart.alpha``, never the flat name.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Range:
    """``low <= value <= high`` (``low < value`` when ``open_low``); for a list, every element."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False

    def holds(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return False
        return self.high is None or value <= self.high

    def __str__(self) -> str:
        if self.low is not None and self.high is not None:
            return f"between {_number(self.low)} and {_number(self.high)}"
        if self.low is not None:
            return f"{'>' if self.open_low else '>='} {_number(self.low)}"
        return f"<= {_number(self.high)}"


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


COUNT = Range(low=1)  # epochs, batch sizes, steps, images, directions, repeats
LIMIT = Range(low=0)  # a cap or a size where 0 means "all" (stream limits) or "none" (t-SNE points)
RATIO = Range(low=1)  # imbalance ratios and long-tail rho: max class frequency over min
WEIGHT = Range(low=0)  # loss weights (alpha)
POSITIVE = Range(low=0, open_low=True)  # Dirichlet concentrations, temperatures
SEVERITY = Range(low=1, high=5)
SEED = Range(low=0, high=2**32 - 1)  # torch.manual_seed takes < 2**63, numpy's RandomState < 2**32


# Called with a setting's flat key and value each time code reads it from the tree (None: nobody listens). A
# notebook's kernel sets it (dartlib.provenance.record_setting_reads) so that its page records the values it
# read, and a profile edit makes stale exactly the pages that read the value.
on_read: Callable[[str, Any], None] | None = None


class Section:
    """A section of the tree: reading one of its settings tells :data:`on_read` the setting's key."""

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if on_read is not None:
            key = _keys_of(type(self)).get(name)
            if key is not None:
                on_read(key, value)
        return value


# The name under which a run (``python -m dartlib run --set`` / ``--overrides``) hands a notebook the values it
# overrides that its parameters cell does not take: they go on top of the profile's, as the cell's own do.
OVERRIDES = "settings_overrides"


def setting(default: Any, why: str, *, key: str | None = None, range: Range | None = None,
            names: str | None = None) -> Any:
    """A field of a section: its ``default``, ``why`` it has it, its flat ``key`` (the field's own
    name when None), the ``range`` a number (or each number of a list) must hold and the kind of
    ``names`` a string (or each string of a list) must be (``dartlib.schema.NAME_KINDS``)."""
    metadata = {"key": key, "why": why, "range": range, "names": names}
    if isinstance(default, list):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Run(Section):
    """What a run of the suite does beyond the notebooks' own settings: which notebooks, where grids run."""

    notebooks: list[str] = setting([], "the notebooks `python -m dartlib run` executes when none are named "
                                       "(empty: all)")
    grid_backend: str = setting("local", "where `python -m dartlib grid` runs its cells: local processes or Ray",
                                names="grid backend")
    shortcut_studies: list = setting(
        [], "studies held at the former shortcut g_phi until their rows at this profile's are computed", names='study')


@dataclass(frozen=True)
class Protocols(Section):
    """Notebook 00: the label-shift protocols drawn on the profile's dataset (Appendix A, Section 4)."""

    dataset: str = setting(
        'fmnist', "the profile's dataset (fmnist for smoke, cifar10 for cpu/paper)",
        key='data_dataset', names='dataset')
    chunks: int = setting(250, 'number of Dirichlet chunks N_dir (Appendix A)', key='dir_chunks', range=COUNT)
    rho: float = setting(100.0, 'imbalance ratio of the LT histograms', key='protocol_rho', range=RATIO)
    ir: float = setting(50.0, 'imbalance ratio of the online-imbalance histogram', key='protocol_ir', range=RATIO)


@dataclass(frozen=True)
class Source(Section):
    """Notebook 02: the source model (its data, backbone and training recipe) and its evaluation."""

    dataset: str = setting('fmnist', 'clean source data set', key='source_dataset', names='dataset')
    arch: str = setting(
        'small-cnn', 'backbone (dartlib.models.backbones.ARCHITECTURES)', key='source_arch', names='architecture')
    recipe: str = setting('smoke', 'training recipe (dartlib.models.training.RECIPES)', key='source_recipe',
                          names='recipe')
    eval_limit: int = setting(1000, 'test images per corruption (0: all 10,000)', range=LIMIT)
    retrain_check: bool = setting(
        False, 'True: also retrain the recipe in a scratch folder and compare with the committed model')


@dataclass(frozen=True)
class Test(Section):
    """The test streams every study draws: the corrupted sets, their severity, the batch and the label shifts."""

    corrupted_dataset: str = setting('fmnistc', 'corrupted test sets in the CIFAR-C layout', names='dataset')
    severity: int = setting(5, 'corruption severity', range=SEVERITY)
    batch_size: int = setting(200, 'test batch size (the paper: 200 on CIFAR)', key='test_batch_size', range=COUNT)
    lt_rhos: list[int] = setting([1, 10, 100], 'imbalance ratios of the appendix figures', range=RATIO)
    imb_subset_size: int = setting(
        100, 'images per subset of an online-imbalance stream (the paper: 1000 of 10000)', range=COUNT)


@dataclass(frozen=True)
class Dart(Section):
    """g_phi and its intermediate training (Appendix A; Alg. 1; Eqs. 2-4): the profile's main refiner."""

    delta: float = setting(
        10.0, 'Dirichlet concentration delta of the intermediate batches (Appendix A)', key='dir_delta', range=POSITIVE)
    batch_size: int = setting(64, 'intermediate batch size (Appendix A)', key='int_batch_size', range=COUNT)
    n_dir: int = setting(
        25, 'Dirichlet chunks over D_int, about 200 images per chunk as in the paper', key='dart_n_dir', range=COUNT)
    alpha: float = setting(0.1, 'weight of L_bal (Eq. 3)', key='dart_alpha', range=WEIGHT)
    epochs: int = setting(5, 'intermediate epochs (the paper: 50 on CIFAR-10)', key='dart_epochs', range=COUNT)
    per_class: int = setting(500, 'D_int images per class (0: every training image)', key='dart_per_class', range=LIMIT)
    hidden: int = setting(1000, 'hidden width of g_phi', key='dart_hidden', range=COUNT)


@dataclass(frozen=True)
class Intermediate(Section):
    """Notebook 04: what its study of g_phi's training averages over and sweeps (Appendix D)."""

    corruptions: list[str] = setting(
        ['gaussian_noise', 'shot_noise', 'defocus_blur', 'glass_blur', 'elastic_transform', 'pixelate'],
        'corruptions averaged', key='eval_corruptions',
        names='corruption')
    alpha_grid: list[float] = setting([0.0, 0.1, 1.0], 'alphas of the Appendix D figures', range=WEIGHT)
    sweep_epochs: int = setting(
        2, 'epochs of the refiners of the parameterisation comparison and the alpha figure',
        key='dart_sweep_epochs', range=COUNT)


@dataclass(frozen=True)
class Toy(Section):
    """Notebook 01: the toy Gaussian analysis (Section 3)."""

    n_sim: int = setting(1000000, 'Monte-Carlo sample size, at least one million', key='toy_n_sim', range=COUNT)
    grid_points: int = setting(
        25, 'values of p per (beta, d/sigma) in the property grid', key='toy_grid_points', range=COUNT)


@dataclass(frozen=True)
class Confusion(Section):
    """Notebook 03: the confusion matrices (Figure 1 and the appendix figures)."""

    rho: float = setting(100.0, 'imbalance ratio of Figure 1', key='confusion_rho', range=RATIO)
    fig1_corruptions: list[str] = setting(
        ['gaussian_noise', 'defocus_blur', 'snow'], 'the corruptions of Figure 1', names='corruption')
    corruptions: list[str] = setting(
        ['gaussian_noise', 'defocus_blur', 'snow'], 'corruptions of the appendix figures (the paper: all 15)',
        key='confusion_corruptions', names='corruption')


@dataclass(frozen=True)
class Deviation(Section):
    """Notebook 05: the prediction deviation (Figures 3 and 4)."""

    irs: list[int] = setting(
        [1, 5, 20, 50, 5000], 'imbalance ratios of Figure 4 (CIFAR-10C-imb)', key='deviation_irs', range=RATIO)
    rho_grid: list[int] = setting([1, 5, 20, 100], 'imbalance ratios of Figure 3', range=RATIO)
    fig3_corruptions: list[str] = setting(['gaussian_noise'], 'corruptions averaged in Figure 3', names='corruption')


@dataclass(frozen=True)
class Table1(Section):
    """Notebook 06: Table 1 (every method with and without DART on the LT streams)."""

    corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of the Table 1 block', key='table1_corruptions', names='corruption')
    stream_limit: int = setting(600, 'images kept per LT stream (0: all)', key='table1_stream_limit', range=LIMIT)
    extra_methods: list[str] = setting(
        ['memo', 'roid'], 'appendix methods run on the same streams (not in Table 1)', names='method')
    paper_config_profile: str = setting(
        'cpu', "whose rows of Table 1 at the paper's g_phi to show (the cpu profile's: ResNet-26 w16)")
    paper_config_compute: bool = setting(
        False, 'compute its missing cells first (hours on a CPU; `python -m dartlib grid paper_config`)')


@dataclass(frozen=True)
class Methods(Section):
    """Options of the test-time methods that several studies share (NOTE, MEMO, DART-split)."""

    note_finetune_epochs: int = setting(1, 'IABN fine-tuning epochs for NOTE (the paper: 30)', range=COUNT)
    note_per_class: int = setting(500, 'IABN fine-tuning images per class (0: every training image)', range=LIMIT)
    memo_augmentations: int = setting(2, 'MEMO views per test image (the MEMO paper uses 32)', range=COUNT)
    split_temperature: float = setting(
        1.1, "DART-split's test-time softmax temperature on CIFAR-10C (Appendix B)", range=POSITIVE)


@dataclass(frozen=True)
class Ablations(Section):
    """Notebook 07: the ablations (Table 4) and the refiners of notebooks 07 and 08."""

    alpha: float = setting(
        0.1, "weight of L_bal (Eq. 3) of this notebook's shorter refiners", key='ablation_alpha', range=WEIGHT)
    epochs: int = setting(3, 'intermediate epochs of every variant (the paper: 50)', key='ablation_epochs', range=COUNT)
    per_class: int = setting(200, 'D_int images per class (0: every training image)', key='ablation_per_class',
                             range=LIMIT)
    n_dir: int = setting(
        10, 'Dirichlet chunks over D_int (about 200 images per chunk, as in the paper)',
        key='ablation_n_dir', range=COUNT)
    corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions averaged', key='ablation_corruptions', names='corruption')
    imb_irs: list[int] = setting(
        [1, 20, 50, 5000], 'imbalance ratios of the online-imbalance streams (Table 4)', range=RATIO)


@dataclass(frozen=True)
class Sensitivity(Section):
    """Notebook 08: the sensitivity tables (alpha, intermediate batch, width, epochs, test batch)."""

    corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of the BNAdapt+DART tables', key='sensitivity_corruptions', names='corruption')
    tent_corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of the TENT cells (alpha and test-batch tables)', names='corruption')
    tent_stream_limit: int = setting(500, 'images kept per TENT stream (0: all)', range=LIMIT)
    alpha_values: list[float] = setting([0.0, 0.1, 1.0], 'the alpha table (the paper: 0, 0.01, 0.1, 0.5, 1)',
                                        range=WEIGHT)
    int_batches: list[int] = setting(
        [32, 64], 'intermediate batch sizes (the paper: 32, 64, 128)', key='hyper_int_batches', range=COUNT)
    hidden: list[int] = setting(
        [250, 1000], 'hidden widths (the paper: 250, 500, 1000, 2000)', key='hyper_hidden', range=COUNT)
    equal_steps: bool = setting(
        False, "also train each other intermediate batch size for the default's optimiser steps",
        key='hyper_equal_steps')
    epochs_grid: list[int] = setting([1, 3], 'intermediate epochs (the paper: 1, 5, 10, 25, 50)', range=COUNT)
    epochs_imb_irs: list[int] = setting(
        [5000], "IRs of CIFAR-10C-imb streams for the epochs refiners (beyond the paper's table)", range=RATIO)
    test_batches: list[int] = setting([8, 32, 200], 'test batch sizes (the paper: 4, 8, 16, 32, 64, 200)', range=COUNT)
    all_corruptions_profile: str = setting(
        'cpu', 'whose TENT and MEMO rows over all 15 corruptions notebooks 08 and 09 show '
        '(`python -m dartlib grid sensitivity_all_corruptions`, `... grid all_corruptions`)')


@dataclass(frozen=True)
class MoreSettings(Section):
    """Notebook 09: the further settings (CIFAR-10C-imb, mixed domains, MEMO, condensed data)."""

    imb_table_irs: list[int] = setting([1, 20, 5000], 'imbalance ratios of the CIFAR-10C-imb table', range=RATIO)
    imb_corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of NoAdapt and BNAdapt (+DART) on CIFAR-10C-imb', names='corruption')
    mixed_pool: int = setting(1500, 'images drawn from the 15-corruption pool (0: all of them)', range=LIMIT)
    mixed_delta: float = setting(0.1, 'Dirichlet delta of the non-i.i.d. mixed stream', range=POSITIVE)
    memo_corruptions: list[str] = setting(['gaussian_noise'], 'corruptions of the MEMO table', names='corruption')
    memo_stream_limit: int = setting(200, 'images kept per MEMO stream (0: all)', range=LIMIT)
    condensed_ipc: int = setting(50, 'images per class of the condensed set', range=COUNT)
    condensed_epochs: int = setting(
        20, 'intermediate epochs on the condensed set (about 8 steps each at 50 per class)', range=COUNT)
    condensed_n_dir: int = setting(5, 'Dirichlet chunks over the condensed set (about 100 images each)', range=COUNT)
    condensed_corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of the condensed-data table', names='corruption')


@dataclass(frozen=True)
class Costs(Section):
    """Notebook 10: the cost table (Section 4.3)."""

    corruption: str = setting('gaussian_noise', 'the balanced test stream timed', key='cost_corruption',
                              names='corruption')
    stream_limit: int = setting(2000, 'images of that stream (0: all)', key='cost_stream_limit', range=LIMIT)
    repeats: int = setting(1, 'timed repeats (best kept)', key='cost_repeats', range=COUNT)
    intermediate_steps_timed: int = setting(20, 'intermediate steps timed for the per-epoch estimate', range=COUNT)
    remeasure: bool = setting(
        False, 'time again even where the stored timings are current (each names its machine)', key='remeasure_costs')


@dataclass(frozen=True)
class Online(Section):
    """Notebook 11: online imbalance and DART-split (Table 2)."""

    irs: list[int] = setting(
        [1, 20, 5000], 'imbalance ratios of the online-imbalance streams', key='online_irs', range=RATIO)
    corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of NoAdapt and BNAdapt (+DART, +DART-split)',
        key='online_corruptions', names='corruption')
    split_tta_corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of TENT, SAR and ODS (+DART-split)', names='corruption')
    large_benchmarks: list[str] = setting(
        ['cifar100c-imb', 'imagenet-c-imb'], 'Table 2 blocks run where their data are present', names='benchmark')


@dataclass(frozen=True)
class NaturalShifts(Section):
    """Notebook 12: natural distribution shifts (PACS, OfficeHome, DomainNet-126)."""

    benchmarks: list[str] = setting(
        ['pacs', 'officehome', 'domainnet126'], 'run where their data are present',
        key='domain_benchmarks', names='benchmark')


@dataclass(frozen=True)
class Hoc(Section):
    """Notebook 13: Appendix E's HOC comparison and t-SNE maps."""

    corruption: str = setting(
        'gaussian_noise', "the corruption of Appendix E's figure", key='hoc_corruption', names='corruption')
    rho: float = setting(100.0, "the LT imbalance ratio of Appendix E's figure", key='hoc_rho', range=RATIO)
    steps: int = setting(800, "Adam steps of HOC's fit", key='hoc_steps', range=COUNT)
    tsne_points: int = setting(400, 'points shown in the t-SNE maps (0: the whole stream)', range=LIMIT)


@dataclass(frozen=True)
class BackboneStudy(Section):
    """Notebook 14: DART's gain against the backbone's strength."""

    profile: str = setting(
        'cpu', "whose study rows to read (and compute): the study uses the cpu profile's models",
        key='study_profile', names='profile')
    compute: bool = setting(
        False, 'compute missing or stale cells first (hours on a CPU), else read the committed rows',
        key='study_compute')
    archs: list[str] = setting(
        ['resnet26-w8', 'resnet26-w16'], "backbones, weakest first; the last is the profile's own",
        key='study_archs', names='architecture')
    severities: list[int] = setting(
        [1, 2, 3, 4, 5], "severities of the profile's own backbone", key='study_severities', range=SEVERITY)


@dataclass(frozen=True)
class Diagnosis(Section):
    """Notebook 15: the diagnosis of g_phi's variants."""

    profile: str = setting(
        'cpu', "whose rows to read (and compute): the cpu profile's source model",
        key='diagnosis_profile', names='profile')
    compute: bool = setting(
        False, 'train the missing refiners and compute missing or stale cells first (hours on a CPU)',
        key='diagnosis_compute')
    variants: list[str] = setting(
        ['table1', 'epochs50', 'alpha0.1-epochs50', 'alpha0', 'alpha0.1', 'alpha1', 'alpha10', 'delta1', 'ndir10',
         'shuffled', 'mix-ndir10', 'batch200', 'perclass1000', 'seed1', 'seed2'],
        "the variants shown (dartlib.studies.diagnosis.VARIANTS)", key='diagnosis_variants',
        names='diagnosis variant')


@dataclass(frozen=True)
class OwnModel(Section):
    """Notebook 16: DART on a model trained from scratch, through the public API."""

    train_images: int = setting(
        3000, 'training images the model is trained on (0: the whole split)', key='own_train_images', range=LIMIT)
    train_epochs: int = setting(
        1, "epochs of the model's own training (Adam, lr 1e-3)", key='own_train_epochs', range=COUNT)
    per_class: int = setting(
        200, 'D_int images per class for g_phi (0: all that every class has)', key='own_per_class', range=LIMIT)
    n_dir: int = setting(10, "Dirichlet chunks over D_int (the paper's 200 images per chunk)", key='own_n_dir', range=COUNT)
    epochs: int = setting(5, 'intermediate epochs of g_phi (the paper: 50)', key='own_epochs', range=COUNT)
    rhos: list[int] = setting([1, 100], 'imbalance ratios of the test streams (1: i.i.d.)', key='own_rhos', range=RATIO)
    corruptions: list[str] = setting(
        ['gaussian_noise'], 'corruptions of the test streams', key='own_corruptions', names='corruption')
    stream_limit: int = setting(1000, 'images per test stream (0: the whole stream)', key='own_stream_limit', range=LIMIT)


@dataclass(frozen=True)
class SettingsTree(Section):
    """Every setting of a run: the profile's name and seed, then one section per study."""

    profile: str = setting("smoke", "profile name: decides figures/<profile>/ and results/<profile>/", names="profile")
    seed: int = setting(0, "seed of the source model, g_phi, the test streams and every other draw", range=SEED)
    run: Run = field(default_factory=Run)
    protocols: Protocols = field(default_factory=Protocols)
    source: Source = field(default_factory=Source)
    test: Test = field(default_factory=Test)
    dart: Dart = field(default_factory=Dart)
    intermediate: Intermediate = field(default_factory=Intermediate)
    toy: Toy = field(default_factory=Toy)
    confusion: Confusion = field(default_factory=Confusion)
    deviation: Deviation = field(default_factory=Deviation)
    table1: Table1 = field(default_factory=Table1)
    methods: Methods = field(default_factory=Methods)
    ablations: Ablations = field(default_factory=Ablations)
    sensitivity: Sensitivity = field(default_factory=Sensitivity)
    more_settings: MoreSettings = field(default_factory=MoreSettings)
    costs: Costs = field(default_factory=Costs)
    online: Online = field(default_factory=Online)
    natural_shifts: NaturalShifts = field(default_factory=NaturalShifts)
    hoc: Hoc = field(default_factory=Hoc)
    backbone_study: BackboneStudy = field(default_factory=BackboneStudy)
    diagnosis: Diagnosis = field(default_factory=Diagnosis)
    own_model: OwnModel = field(default_factory=OwnModel)

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> SettingsTree:
        """The tree of flat ``values`` (a profile's, keyed by :data:`SETTINGS`' keys): a key absent
        keeps its default; a key the tree does not know raises KeyError naming the valid ones (the
        inverse: :func:`flat_values`)."""
        unknown = sorted(set(values) - set(SETTINGS))
        if unknown:
            raise KeyError(f"unknown settings {unknown}; valid: {', '.join(SETTINGS)}")
        top, sections = {}, {}
        for key, value in values.items():
            where = SETTINGS[key]
            if where.section is None:
                top[where.name] = value
            else:
                sections.setdefault(where.section, {})[where.name] = value
        return cls(**top, **{name: kind(**sections.get(name, {})) for name, kind in SECTIONS.items()})


@dataclass(frozen=True)
class Place:
    """Where a flat key lives in the tree: ``section`` (None at the root) and the field's ``name``,
    with the field itself (its default and metadata)."""

    section: str | None
    name: str
    field: dataclasses.Field

    @property
    def path(self) -> str:
        """``section.name`` (``dart.alpha``), or ``name`` at the root."""
        return self.name if self.section is None else f"{self.section}.{self.name}"

    def default(self) -> Any:
        """The default, a fresh copy (a list is never shared)."""
        f = self.field
        return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _places() -> dict[str, Place]:
    places = {}
    for top in dataclasses.fields(SettingsTree):
        if "why" in top.metadata:  # profile and seed, at the root
            inner = [(None, top)]
        else:
            inner = [(top.name, f) for f in dataclasses.fields(top.default_factory)]
        for section, f in inner:
            key = f.metadata["key"] or f.name
            if key in places:
                raise ValueError(f"settings tree: key {key!r} is held twice ({places[key].path} and "
                                 f"{section}.{f.name})")
            places[key] = Place(section, f.name, f)
    return places


# flat key -> where it lives in the tree, in the tree's order
SETTINGS: dict[str, Place] = _places()
SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(SettingsTree) if "why" not in f.metadata}
# section class (SettingsTree for the root) -> its fields' names -> their flat keys, for :data:`on_read`
_KEYS: dict[type, dict[str, str]] = {}
for _key, _place in SETTINGS.items():
    _KEYS.setdefault(SettingsTree if _place.section is None else SECTIONS[_place.section], {})[_place.name] = _key


@functools.cache
def _keys_of(cls: type) -> dict[str, str]:
    """The flat keys of ``cls``'s settings by field name: its own section's, or the root's for a subclass
    of :class:`SettingsTree` (such as ``dartlib.experiments.settings.Settings``); empty for any other."""
    return next((_KEYS[c] for c in cls.__mro__ if c in _KEYS), {})


def default_values() -> dict[str, Any]:
    """Every setting's default, by its flat key: the base every profile's chain starts from."""
    return {key: place.default() for key, place in SETTINGS.items()}


def flat_values(tree: SettingsTree) -> dict[str, Any]:
    """The settings of ``tree`` by flat key (not a read: :data:`on_read` is not told)."""
    return {key: vars(tree if p.section is None else vars(tree)[p.section])[p.name] for key, p in SETTINGS.items()}
