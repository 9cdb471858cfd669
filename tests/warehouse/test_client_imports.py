"""Recording rows does not import pandas (a fifth to a third of a second in every CLI process), and
clickhouse-connect's DataFrame path still works afterwards in the same process."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.integration


def test_row_inserts_leave_pandas_unimported_and_dataframes_still_insert(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from membench.warehouse.client import connect

        warehouse = connect("chdb://{tmp_path / 'wh'}")
        warehouse.command("CREATE TABLE t (k UInt32, v String) ENGINE = MergeTree ORDER BY k")
        warehouse.insert("t", [[1, "a"], [2, "b"]], ["k", "v"], dedup_token="rows")
        print("pandas after rows:", "pandas" in sys.modules)

        import pandas
        warehouse._client.insert_df("t", pandas.DataFrame({{"k": [3], "v": ["c"]}}))
        print("rows:", warehouse.query_rows("SELECT k, v FROM t ORDER BY k"))
        warehouse.close()
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "pandas after rows: False" in result.stdout
    assert "rows: [(1, 'a'), (2, 'b'), (3, 'c')]" in result.stdout
