"""What the helpers shared by both adapters use of a version's generated types.

v1 and v2 name and shape prompt blocks, elicitations and MCP servers alike, so
`sessions` builds them once, from the module it is handed (``schema_v1`` or
``schema_v2``). A module satisfies the Protocol of its version, so mypy checks
every call a helper makes against each version's classes: a helper takes
``schema: Schema`` (a type variable of the two, its body checked once per
version) and overloads say which version's types it returns.
The wire modules are imported for type checking only (v2's cost start-up time).
"""

from __future__ import annotations

__all__ = ["V1", "V2", "Schema"]

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from acp_nvim.protocol import schema_v1 as v1
    from acp_nvim.protocol import schema_v2 as v2


class V1(Protocol):
    """The generated types of ACP v1 (``schema_v1``) the shared helpers use."""

    # prompt content
    ContentBlockText: type[v1.ContentBlockText]
    ContentBlockImage: type[v1.ContentBlockImage]
    ContentBlockResource: type[v1.ContentBlockResource]
    ContentBlockResourceLink: type[v1.ContentBlockResourceLink]
    TextResourceContents: type[v1.TextResourceContents]
    # elicitation
    CreateElicitationRequestForm: type[v1.CreateElicitationRequestForm]
    CreateElicitationRequestUrl: type[v1.CreateElicitationRequestUrl]
    CreateElicitationResponseAccept: type[v1.CreateElicitationResponseAccept]
    CreateElicitationResponseDecline: type[v1.CreateElicitationResponseDecline]
    CreateElicitationResponseCancel: type[v1.CreateElicitationResponseCancel]
    ElicitationPropertySchemaString: type[v1.ElicitationPropertySchemaString]
    ElicitationPropertySchemaNumber: type[v1.ElicitationPropertySchemaNumber]
    ElicitationPropertySchemaInteger: type[v1.ElicitationPropertySchemaInteger]
    ElicitationPropertySchemaBoolean: type[v1.ElicitationPropertySchemaBoolean]
    ElicitationPropertySchemaArray: type[v1.ElicitationPropertySchemaArray]
    # MCP servers offered, and MCP over ACP
    McpServerStdio: type[v1.McpServerStdio]
    McpServerHttp: type[v1.McpServerHttp]
    McpServerAcp: type[v1.McpServerAcp]
    EnvVariable: type[v1.EnvVariable]
    HttpHeader: type[v1.HttpHeader]
    ConnectMcpRequest: type[v1.ConnectMcpRequest]
    ConnectMcpResponse: type[v1.ConnectMcpResponse]
    MessageMcpRequest: type[v1.MessageMcpRequest]
    MessageMcpNotification: type[v1.MessageMcpNotification]
    DisconnectMcpRequest: type[v1.DisconnectMcpRequest]
    DisconnectMcpResponse: type[v1.DisconnectMcpResponse]
    # plans with ids
    PlanUpdateContentItems: type[v1.PlanUpdateContentItems]
    PlanUpdateContentMarkdown: type[v1.PlanUpdateContentMarkdown]
    PlanUpdateContentFile: type[v1.PlanUpdateContentFile]


class V2(Protocol):
    """The generated types of ACP v2 (``schema_v2``) the shared helpers use."""

    # prompt content
    ContentBlockText: type[v2.ContentBlockText]
    ContentBlockImage: type[v2.ContentBlockImage]
    ContentBlockResource: type[v2.ContentBlockResource]
    ContentBlockResourceLink: type[v2.ContentBlockResourceLink]
    TextResourceContents: type[v2.TextResourceContents]
    # elicitation
    CreateElicitationRequestForm: type[v2.CreateElicitationRequestForm]
    CreateElicitationRequestUrl: type[v2.CreateElicitationRequestUrl]
    CreateElicitationResponseAccept: type[v2.CreateElicitationResponseAccept]
    CreateElicitationResponseDecline: type[v2.CreateElicitationResponseDecline]
    CreateElicitationResponseCancel: type[v2.CreateElicitationResponseCancel]
    ElicitationPropertySchemaString: type[v2.ElicitationPropertySchemaString]
    ElicitationPropertySchemaNumber: type[v2.ElicitationPropertySchemaNumber]
    ElicitationPropertySchemaInteger: type[v2.ElicitationPropertySchemaInteger]
    ElicitationPropertySchemaBoolean: type[v2.ElicitationPropertySchemaBoolean]
    ElicitationPropertySchemaArray: type[v2.ElicitationPropertySchemaArray]
    # MCP servers offered, and MCP over ACP
    McpServerStdio: type[v2.McpServerStdio]
    McpServerHttp: type[v2.McpServerHttp]
    McpServerAcp: type[v2.McpServerAcp]
    EnvVariable: type[v2.EnvVariable]
    HttpHeader: type[v2.HttpHeader]
    ConnectMcpRequest: type[v2.ConnectMcpRequest]
    ConnectMcpResponse: type[v2.ConnectMcpResponse]
    MessageMcpRequest: type[v2.MessageMcpRequest]
    MessageMcpNotification: type[v2.MessageMcpNotification]
    DisconnectMcpRequest: type[v2.DisconnectMcpRequest]
    DisconnectMcpResponse: type[v2.DisconnectMcpResponse]
    # plans with ids
    PlanUpdateContentItems: type[v2.PlanUpdateContentItems]
    PlanUpdateContentMarkdown: type[v2.PlanUpdateContentMarkdown]
    PlanUpdateContentFile: type[v2.PlanUpdateContentFile]


Schema = TypeVar("Schema", V1, V2)
