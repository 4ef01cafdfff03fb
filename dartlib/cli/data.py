"""``data`` and ``travel``: the data sets present, downloaded, generated and packed, and what goes
to a GPU machine and comes back (docs/data.md, docs/gpu.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from dartlib.cli.common import DATA_ROOT_CHANGE, data_folders, names_of, part_size_mib, writable


def _cmd_data_status(_: argparse.Namespace) -> int:
    from dartlib.data.sources import status

    damaged = 0
    for row in status():
        mark = ("DAMAGED" if row["problem"] else "present") if row["present"] else "ABSENT "
        print(f"{row['dataset']:<13} {mark}  {row['path']}")
        if row["problem"]:
            damaged += 1
            print(f"{'':<13}          wrong: {row['problem']}")
            print(f"{'':<13}          how to get it again: {row['how to get it']}")
        elif not row["present"]:
            print(f"{'':<13}          how to get it: {row['how to get it']}")
    return 1 if damaged else 0


def _cmd_data_download(args: argparse.Namespace) -> int:
    from dartlib.data.download import download

    writable(*data_folders()[:1])
    print(f"{args.dataset}: {download(args.dataset)}")
    return 0


def _cmd_data_prepare(args: argparse.Namespace) -> int:
    from dartlib.data.corruptions import CORRUPTIONS
    from dartlib.data.prepare import prepare_corrupted
    from dartlib.data.corrupted_sets import corrupted_dir

    writable((corrupted_dir(args.dataset), DATA_ROOT_CHANGE), *data_folders()[:1])
    folder = prepare_corrupted(
        args.dataset,
        severities=args.severities,
        corruptions=args.corruptions or CORRUPTIONS,
        seed=args.seed,
    )
    print(f"{args.dataset}: written to {folder}")
    return 0


def _cmd_data_pack(args: argparse.Namespace) -> int:
    from dartlib.data.packed import pack_image_folder
    from dartlib.environment import setting

    root = args.root or setting("DART_CIFAR10_DIR")
    if not root:
        raise SystemExit("give the CIFAR-10 image folder: --root DIR or DART_CIFAR10_DIR")
    index = pack_image_folder(root, args.out, preset=args.preset)
    sizes = ", ".join(f"{split} {len(entry['labels'])}" for split, entry in index["splits"].items())
    print(f"{args.out}: {sizes} images, {len(index['frost'])} frost photographs")
    return 0


def _cmd_travel_copy(args: argparse.Namespace) -> int:
    from dartlib.data.packed import pack_image_folder
    from dartlib.environment import setting
    from dartlib.data.travel import MIB, TRAVEL_LIMIT, folder_bytes, sparse_copy

    extra = []
    if args.pack_cifar10:
        root = setting("DART_CIFAR10_DIR")
        if not root:
            raise SystemExit("--pack-cifar10 needs the CIFAR-10 image folder in DART_CIFAR10_DIR")
        packed = Path(args.out).with_name(Path(args.out).name + ".cifar10.xz")
        pack_image_folder(root, packed, preset=6)
        extra.append(packed)
    copy = sparse_copy(args.out, extra=extra + list(args.carry or []))
    for path in extra:
        path.unlink()
    total = folder_bytes(args.out)
    print(copy.describe())
    print(f"travels: {total / MIB:.1f} MiB of the {TRAVEL_LIMIT / MIB:.0f} MiB a GPU slot takes")
    return 0 if total <= TRAVEL_LIMIT else 4


def _cmd_travel_patterns(_: argparse.Namespace) -> int:
    from dartlib.data.travel import SPARSE_PATTERNS

    print("\n".join(SPARSE_PATTERNS))  # one a line: git sparse-checkout set --no-cone --stdin
    return 0


def _cmd_travel_split(args: argparse.Namespace) -> int:
    from dartlib.data.travel import MIB, split_file

    manifest = split_file(args.file, args.out, part_bytes=int(args.part_mib * MIB))
    print(manifest)
    return 0


def _cmd_travel_join(args: argparse.Namespace) -> int:
    from dartlib.data.travel import join_parts, sha256_file

    out = join_parts(args.manifest, args.out)
    print(f"{out}: sha256 {sha256_file(out)} (checked against {args.manifest})")
    return 0


def _cmd_travel_unpack(args: argparse.Namespace) -> int:
    from dartlib.data import packed

    index, payload = packed.read_packed(args.packed)
    out = Path(args.out).resolve()
    site = packed.install_frost(index, payload, out / "site")
    arrays = {split: packed.decode_split(index, payload, split) for split in ("train", "test")}
    root = packed.install_as_image_folder(arrays, out / "cifar10")
    print(f"export DART_CIFAR10_DIR={root}")
    if site is not None:  # the kernels import imagecorruptions' frost photographs from there
        print(f"export PYTHONPATH={out / 'site'}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0


def add_data(sub) -> None:
    data = sub.add_parser("data", help="datasets: status and local generation").add_subparsers(dest="data", required=True)
    data.add_parser("status", help="which datasets are present, where, and how to get the others").set_defaults(
        func=_cmd_data_status
    )
    fetch = data.add_parser("download", help="download a dataset with a public source (checksums verified)")
    fetch.add_argument("dataset", choices=["cifar10", "cifar100", "fmnist", "cifar10c", "cifar100c"],
                       help="the dataset to download into the data root")
    fetch.set_defaults(func=_cmd_data_download)
    prepare = data.add_parser("prepare", help="generate a corrupted test set in the CIFAR-C layout")
    prepare.add_argument("dataset", choices=["cifar10c", "cifar100c", "fmnistc"],
                         help="the corrupted test set to generate from its clean test set")
    prepare.add_argument("--severities", type=int, nargs="+", default=[5], choices=range(1, 6), metavar="{1..5}",
                         help="the severities to generate (default: 5, the paper's)")
    prepare.add_argument("--corruptions", nargs="+", type=names_of("corruption"),
                         help="the corruptions to generate (default: all 15)")
    prepare.add_argument("--seed", type=int, default=0, help="seed of the corruptions' random draws")
    prepare.set_defaults(func=_cmd_data_prepare)

    pack = data.add_parser("pack-cifar10", help="pack the CIFAR-10 image folder into one lzma file (for a GPU machine)")
    pack.add_argument("--out", required=True, help="the packed file, e.g. .gpu_carry/cifar10.xz")
    pack.add_argument("--root", help="the image folder (default: $DART_CIFAR10_DIR)")
    pack.add_argument("--preset", type=int, default=6, help="lzma preset (default 6)")
    pack.set_defaults(func=_cmd_data_pack)


def add_travel(sub) -> None:
    travel = sub.add_parser("travel", help="what goes to a GPU machine (at most 64 MiB) and what comes back "
                                           "(parts of at most 16 MiB)").add_subparsers(dest="travel", required=True)
    tcopy = travel.add_parser("copy", help="the tracked files a GPU run of the notebooks reads, into a new folder")
    tcopy.add_argument("--out", required=True, type=Path, help="a new folder (sent instead of the repository)")
    tcopy.add_argument("--pack-cifar10", action="store_true",
                       help="also pack $DART_CIFAR10_DIR into OUT/.gpu_carry/ (python -m dartlib data pack-cifar10)")
    tcopy.add_argument("--carry", nargs="*", type=Path, help="other files to put under OUT/.gpu_carry/")
    tcopy.set_defaults(func=_cmd_travel_copy)
    travel.add_parser("patterns", help="the same choice as git sparse-checkout patterns (for a checkout whose working "
                                       "tree travels)").set_defaults(func=_cmd_travel_patterns)
    tsplit = travel.add_parser("split", help="a file in parts of at most 16 MiB plus a sha256 manifest")
    tsplit.add_argument("file", type=Path, help="the file to split")
    tsplit.add_argument("--out", required=True, type=Path, help="folder for the parts and the manifest")
    tsplit.add_argument("--part-mib", type=part_size_mib, default=16.0, help="the largest part, MiB (default 16)")
    tsplit.set_defaults(func=_cmd_travel_split)
    tjoin = travel.add_parser("join", help="join parts, checking every part's and the whole file's sha256")
    tjoin.add_argument("manifest", type=Path, help="the <file>.parts.json written by `travel split`")
    tjoin.add_argument("--out", type=Path, help="the joined file (default: its name beside the manifest)")
    tjoin.set_defaults(func=_cmd_travel_join)
    tunpack = travel.add_parser("unpack-cifar10", help="on the GPU machine: the packed CIFAR-10 as an image folder "
                                                      "the notebooks read (prints the exports to make)")
    tunpack.add_argument("--packed", required=True, type=Path, help="the file of `data pack-cifar10`")
    tunpack.add_argument("--out", required=True, type=Path, help="a folder for the image folder and frost photographs")
    tunpack.set_defaults(func=_cmd_travel_unpack)
