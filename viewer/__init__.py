"""The narrative Streamlit viewer (reads the ledger only)."""
