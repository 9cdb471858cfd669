"""Author the built-in pack fixtures/hygiene-v2 from tools/hygiene_*.py and tools/hygiene_*_v2.py.

    python tools/author_hygiene_v2.py [OUT_DIR]      (default: fixtures/hygiene-v2)

hygiene-v2 is hygiene-v1's 34 traps (unchanged, so the two packs compare trap by trap) plus 28
traps on three new repositories of other shapes (a CLI tool, a configuration system, a plugin
registry) and one more C10 trap on tabular: 62 traps, at least 6 per construct, over 6
repositories. Like v1 it is a committed skeleton with {{SECRET:name:class}} placeholders, written
by the same writer (`author_hygiene_v1.write_pack`); values are drawn by `membench pack finalize`.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from author_hygiene_v1 import SKILLS, write_pack  # noqa: E402
from hygiene_checks import CHECKS  # noqa: E402
from hygiene_repos import GENERATED, REPOS  # noqa: E402
from hygiene_repos_v2 import GENERATED_V2, REPOS_V2  # noqa: E402
from hygiene_traps import TRAPS  # noqa: E402
from hygiene_traps_v2 import TRAPS_V2  # noqa: E402
from hygiene_warmups import W  # noqa: E402
from hygiene_warmups_v2 import W2  # noqa: E402

PACK_CURATED = ("# Project notes (hand-curated)\n\n"
                "- Six projects live here: tabular (CSV exports), httpmini (request builder), taskq (job queue), "
                "notecli (a note-taking CLI), cfgsys (layered configuration), plugreg (a plugin registry).\n"
                "- Run the visible tests with `python -m pytest`; every module keeps its own small API.")


def main(out: Path) -> None:
    write_pack(out, name="hygiene-v2", traps=TRAPS + TRAPS_V2, repos={**REPOS, **REPOS_V2},
               generated={**GENERATED, **GENERATED_V2}, warmups={**W, **W2}, checks=CHECKS,
               description=("Memory-hygiene traps (DreamBench-SWE constructs C1-C10), at least six per construct, over six "
                            "small Python projects of different shapes (hygiene-v1's 34 traps plus 28): S1/S2 set up "
                            "evidence, S3 is the scored trap; secrets are CSPRNG placeholders filled at finalize."),
               curated=PACK_CURATED, skills=SKILLS)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures" / "hygiene-v2")
