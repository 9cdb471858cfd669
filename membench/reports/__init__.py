"""Reports of a run set, rebuilt from the warehouse alone: the typed contract (`model`), its
building from the warehouse and the sections (`build`, `failures`, `hygiene`, `comparisons`,
`conventions`), and its renderings for people (`markdown`, `html/`)."""
