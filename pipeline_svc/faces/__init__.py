"""Faces: other projects' server surfaces that routers call, mapped onto our contract (ARCHITECTURE §6). One
module per protocol, its whole field mapping in one table there."""
