import fastavro

from membench.bus.file import FileBus
from membench.bus.emitter import RunEmitter




def test_log_opens_with_a_plain_avro_reader_and_appends_across_opens(tmp_path):
    path = tmp_path / "events.avro"
    bus = FileBus(path)
    first = RunEmitter("rs", "r1", "u", bus.publish)
    for i in range(3):
        first.emit("MemoryCitation", {"memory_ids": [f"m{i}"]})
    bus.close()
    bus = FileBus(path)  # reopen: appends after the existing blocks
    second = RunEmitter("rs", "r2", "u", bus.publish)
    second.emit("MemoryCitation", {"memory_ids": ["x"]})
    bus.close()
    with open(path, "rb") as handle:
        records = list(fastavro.reader(handle))
    assert [(r["run_id"], r["seq"]) for r in records] == [("r1", 0), ("r1", 1), ("r1", 2), ("r2", 0)]
    assert records[0]["payload"] == {"memory_ids": ["m0"]}


def test_a_torn_tail_block_is_cut_back_on_reopen(tmp_path):
    path = tmp_path / "events.avro"
    bus = FileBus(path)
    emitter = RunEmitter("rs", "r1", "u", bus.publish)
    emitter.emit("MemoryCitation", {"memory_ids": ["a"]})
    bus.close()
    good = path.stat().st_size
    with open(path, "ab") as handle:  # a crash in the middle of writing a block
        handle.write(b"\x02\x40partial")
    FileBus(path).close()
    assert path.stat().st_size == good
    with open(path, "rb") as handle:
        assert len(list(fastavro.reader(handle))) == 1
