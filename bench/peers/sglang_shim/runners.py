"""`sglang.test.runners`: the rerank test's inputs (its class is skipped: --is-embedding is not served)."""

TEST_RERANK_QUERY_DOCS = [
    {"query": "How many people live in Berlin?", "documents": ["Berlin is well known for its museums."]},
    {
        "query": "How many people live in Berlin?",
        "documents": [
            "Berlin had a population of 3,520,031 registered inhabitants.",
            "Berlin is well known for its museums.",
        ],
    },
]
