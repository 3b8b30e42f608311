"""``asr-pipeline publish``: upload an exported model folder (``asr-pipeline export``) to the Hugging Face
Hub (``publish.hub``). The endpoint is HF_ENDPOINT, the token HF_TOKEN or huggingface_hub's login."""

from __future__ import annotations

import argparse

from asr_pipeline.cli.common import HelpFormatter, UsageError, existing_path, print_json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "publish",
        formatter_class=HelpFormatter,
        help="upload an exported model folder to the Hugging Face Hub",
        description="Create the model repo if needed (--private: private) and the --revision branch, then "
        "commit every file of --export-dir. The token comes from HF_TOKEN or `hf auth login`, never a flag.",
    )
    parser.add_argument(
        "--export-dir",
        required=True,
        metavar="DIR",
        help="a folder `asr-pipeline export` wrote (of a train run or an hf-finetune run)",
    )
    parser.add_argument("--repo-id", required=True, metavar="ID", help="namespace/name on the Hub")
    parser.add_argument("--revision", default="main", help="the branch to commit to (created when missing)")
    parser.add_argument("--private", action="store_true", help="create the repo private")
    parser.add_argument("--message", help="the commit message (default: Upload <folder name>)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from asr_pipeline.publish.hub import HubTarget, publish_folder

    folder = existing_path(args.export_dir, "--export-dir")
    try:
        target = HubTarget(args.repo_id, args.revision, args.private)
    except ValueError as error:
        raise UsageError(f"--repo-id: {error}") from None
    commit = publish_folder(folder, target, args.message)
    print_json({"repo_id": target.repo_id, "revision": target.revision, "commit": commit})
    return 0
