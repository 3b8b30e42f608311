from kedro.pipeline import Node, Pipeline

from asr_pipeline.pipelines.hubert_units.nodes import make_units, phone_alignments


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline(
        [
            Node(
                make_units,
                inputs=["train.manifest", "dev.manifest", "hubert_dir", "params:hubert"],
                outputs="hubert_units_report",
                name="make_units",
            ),
            Node(
                phone_alignments,
                inputs=["hubert_units_report", "dev.raw_manifest", "hubert_dir", "params:hubert"],
                outputs=None,
                name="phone_alignments",
            ),
        ]
    )
