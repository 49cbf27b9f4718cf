from google.api import annotations_pb2 as _annotations_pb2
from scaleout.v1 import engine_pb2 as _engine_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
