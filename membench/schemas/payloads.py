"""Event payloads as TypedDicts: GENERATED from schemas/avsc/event.v6.avsc by
`python -m membench.schemas.payload_types` (see that module); do not edit by hand."""

from typing import Any, Literal, NotRequired, Protocol, TypedDict, TypeVar, overload  # noqa: F401

SCHEMA_VERSION = 6


class RunStarted(TypedDict):
    suite: str
    task: str
    condition: str
    seed: int
    agent: str
    agent_kind: str
    model: NotRequired[None | str]  # default None
    budgets: dict[str, int]
    code_digest: str
    pack_digest: str
    fixture_digest: str
    skill_bank_digest: NotRequired[None | str]  # default None
    attempt: NotRequired[int]  # default 1
    construct: NotRequired[None | str]  # default None
    family: NotRequired[None | str]  # default None
    resolution_policy: NotRequired[str]  # default 'patch_as_submitted'
    memory_model: NotRequired[None | str]  # default None


class BoundedText(TypedDict):
    text: str
    sha256: str
    length: int
    truncated: bool


class SessionStarted(TypedDict):
    session_index: int
    instruction: BoundedText
    start_state: str
    workspace_digest: str
    scored: bool
    oracle_id: NotRequired[None | str]  # default None


class Turn(TypedDict):
    role: str
    text: BoundedText
    source_event_id: NotRequired[None | str]  # default None
    source_kind: NotRequired[None | str]  # default None
    source_scope: NotRequired[list[str]]  # default []
    input_tokens: NotRequired[int]  # default 0
    cached_tokens: NotRequired[int]  # default 0
    output_tokens: NotRequired[int]  # default 0
    reasoning_tokens: NotRequired[int]  # default 0
    latency_ms: NotRequired[int]  # default 0


class ToolCall(TypedDict):
    call_id: str
    name: str
    arguments_digest: str
    is_patch: NotRequired[bool]  # default False


class ToolResult(TypedDict):
    call_id: str
    name: str
    exit_code: int
    duration_ms: int
    output_size: int
    is_patch: NotRequired[bool]  # default False
    output: NotRequired[None | BoundedText]  # default None


class MemoryWrite(TypedDict):
    memory_id: str
    memory_type: str
    scope: list[str]
    provenance_event_ids: list[str]
    content: BoundedText


class MemoryRead(TypedDict):
    query: BoundedText
    candidates: list[str]
    admitted_ids: list[str]
    tokens_admitted: int
    token_budget: int
    context: BoundedText


class MemoryCitation(TypedDict):
    memory_ids: list[str]


class ContextCompaction(TypedDict):
    tokens_before: int
    tokens_after: int


class PatchProduced(TypedDict):
    files: list[str]
    added_lines: int
    removed_lines: int
    production_paths: list[str]
    test_paths: list[str]
    stripped_paths: list[str]
    diff_sha256: str
    production_diff: NotRequired[None | str]  # default None
    production_diff_sha256: NotRequired[None | str]  # default None
    stripped_diff: NotRequired[None | str]  # default None
    stripped_diff_sha256: NotRequired[None | str]  # default None


class OracleCase(TypedDict):
    case_id: str
    outcome: str
    duration_ms: NotRequired[int]  # default 0


class OracleVerdict(TypedDict):
    oracle_id: str
    outcome: str
    cases: list[OracleCase]
    exit_status: int
    inconclusive: bool
    duration_ms: int
    isolation: NotRequired[str]  # default 'in_process'


class SessionEnded(TypedDict):
    session_index: int
    status: str


class RunEnded(TypedDict):
    status: str
    error_type: NotRequired[None | str]  # default None


class OracleLabel(TypedDict):
    label_id: str
    label_type: str
    active_session: int
    event_ids: list[str]
    fact_ids: NotRequired[list[str]]  # default []
    detail: NotRequired[str]  # default '{}'


class ModelCall(TypedDict):
    call_id: str
    provider: str
    api: str
    model: str
    mode: str
    status: str
    http_status: NotRequired[int]  # default 0
    request_digest: str
    match_digest: str
    response_digest: NotRequired[None | str]  # default None
    recorded: NotRequired[bool]  # default False
    streamed: NotRequired[bool]  # default False
    chunks: NotRequired[int]  # default 0
    input_tokens: NotRequired[int]  # default 0
    cached_tokens: NotRequired[int]  # default 0
    output_tokens: NotRequired[int]  # default 0
    reasoning_tokens: NotRequired[int]  # default 0
    latency_ms: NotRequired[int]  # default 0
    first_byte_ms: NotRequired[int]  # default 0
    cost_usd: NotRequired[float]  # default 0.0
    price: NotRequired[None | str]  # default None
    error: NotRequired[None | str]  # default None
    purpose: NotRequired[str]  # default 'agent'


class BankFile(TypedDict):
    path: str
    sha256: str


class SkillBankFrozen(TypedDict):
    bank: str
    digest: str
    files: list[BankFile]
    ablated_skill: NotRequired[None | str]  # default None
    distiller: NotRequired[None | str]  # default None


class TransferPhase(TypedDict):
    phase: str
    round: NotRequired[int]  # default 0


class PublicCheck(TypedDict):
    passed: bool
    exit_status: int
    duration_ms: int
    workspace_digest: str
    output: BoundedText


class SubmissionFrozen(TypedDict):
    digest: str
    files: int
    public_check_passed: bool


class EvaluatorDimension(TypedDict):
    dimension: str
    title: str
    weight: float


class EvaluatorHardCap(TypedDict):
    cap_id: str
    cap: float
    invariant: str
    cases: list[str]


class EvaluatorPlanCase(TypedDict):
    case_id: str
    dimension: str
    weight: float
    prerequisites: list[str]


class EvaluatorPlan(TypedDict):
    task_id: str
    manifest_sha256: str
    max_score: float
    dimensions: list[EvaluatorDimension]
    hard_caps: list[EvaluatorHardCap]
    cases: list[EvaluatorPlanCase]


class EvaluatorCase(TypedDict):
    case_id: str
    dimension: str
    weight: float
    status: str
    duration_ms: int
    evidence_sha256: str
    prerequisites: NotRequired[list[str]]  # default []


# the payload record of each event kind
PAYLOADS: dict[str, type] = {
    'RunStarted': RunStarted,
    'SessionStarted': SessionStarted,
    'Turn': Turn,
    'ToolCall': ToolCall,
    'ToolResult': ToolResult,
    'MemoryWrite': MemoryWrite,
    'MemoryRead': MemoryRead,
    'MemoryCitation': MemoryCitation,
    'ContextCompaction': ContextCompaction,
    'PatchProduced': PatchProduced,
    'OracleVerdict': OracleVerdict,
    'SessionEnded': SessionEnded,
    'RunEnded': RunEnded,
    'OracleLabel': OracleLabel,
    'ModelCall': ModelCall,
    'SkillBankFrozen': SkillBankFrozen,
    'TransferPhase': TransferPhase,
    'PublicCheck': PublicCheck,
    'SubmissionFrozen': SubmissionFrozen,
    'EvaluatorPlan': EvaluatorPlan,
    'EvaluatorCase': EvaluatorCase,
}

Event_co = TypeVar("Event_co", covariant=True)


class Emit(Protocol[Event_co]):
    """`emit(kind, payload, visibility)` typed per kind: a type checker refuses a payload key the
    kind's record does not declare, a missing required key and a value of the wrong type at the
    call site (at run time the encoder refuses an undeclared key, membench/schemas/fastcodec.py). A key left
    out that is `NotRequired` takes the schema's default (DEFAULTS)."""

    @overload
    def __call__(self, kind: Literal['RunStarted'], payload: RunStarted, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['SessionStarted'], payload: SessionStarted, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['Turn'], payload: Turn, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['ToolCall'], payload: ToolCall, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['ToolResult'], payload: ToolResult, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['MemoryWrite'], payload: MemoryWrite, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['MemoryRead'], payload: MemoryRead, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['MemoryCitation'], payload: MemoryCitation, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['ContextCompaction'], payload: ContextCompaction, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['PatchProduced'], payload: PatchProduced, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['OracleVerdict'], payload: OracleVerdict, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['SessionEnded'], payload: SessionEnded, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['RunEnded'], payload: RunEnded, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['OracleLabel'], payload: OracleLabel, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['ModelCall'], payload: ModelCall, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['SkillBankFrozen'], payload: SkillBankFrozen, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['TransferPhase'], payload: TransferPhase, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['PublicCheck'], payload: PublicCheck, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['SubmissionFrozen'], payload: SubmissionFrozen, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['EvaluatorPlan'], payload: EvaluatorPlan, visibility: str = ...) -> Event_co: ...

    @overload
    def __call__(self, kind: Literal['EvaluatorCase'], payload: EvaluatorCase, visibility: str = ...) -> Event_co: ...


# record -> field -> the schema's default (a field missing from an in-process payload reads as this)
DEFAULTS: dict[str, dict[str, Any]] = {
    'EvaluatorCase': {
        'prerequisites': [],
    },
    'ModelCall': {
        'http_status': 0,
        'response_digest': None,
        'recorded': False,
        'streamed': False,
        'chunks': 0,
        'input_tokens': 0,
        'cached_tokens': 0,
        'output_tokens': 0,
        'reasoning_tokens': 0,
        'latency_ms': 0,
        'first_byte_ms': 0,
        'cost_usd': 0.0,
        'price': None,
        'error': None,
        'purpose': 'agent',
    },
    'OracleCase': {
        'duration_ms': 0,
    },
    'OracleLabel': {
        'fact_ids': [],
        'detail': '{}',
    },
    'OracleVerdict': {
        'isolation': 'in_process',
    },
    'PatchProduced': {
        'production_diff': None,
        'production_diff_sha256': None,
        'stripped_diff': None,
        'stripped_diff_sha256': None,
    },
    'RunEnded': {
        'error_type': None,
    },
    'RunStarted': {
        'model': None,
        'skill_bank_digest': None,
        'attempt': 1,
        'construct': None,
        'family': None,
        'resolution_policy': 'patch_as_submitted',
        'memory_model': None,
    },
    'SessionStarted': {
        'oracle_id': None,
    },
    'SkillBankFrozen': {
        'ablated_skill': None,
        'distiller': None,
    },
    'ToolCall': {
        'is_patch': False,
    },
    'ToolResult': {
        'is_patch': False,
        'output': None,
    },
    'TransferPhase': {
        'round': 0,
    },
    'Turn': {
        'source_event_id': None,
        'source_kind': None,
        'source_scope': [],
        'input_tokens': 0,
        'cached_tokens': 0,
        'output_tokens': 0,
        'reasoning_tokens': 0,
        'latency_ms': 0,
    },
}
